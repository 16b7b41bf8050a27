/** A resolved API resource: what a request path and an identity are built from. */
export interface ResourceType {
  readonly group: string;
  readonly version: string;
  /** Plural resource name, e.g. `secrets`. */
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

/** `secrets` or `databases.demo.relsync.dev`: how the CLI and logs name a type. */
export function typeName(type: { group: string; resource: string }): string {
  return type.group ? `${type.resource}.${type.group}` : type.resource;
}

export function apiVersionOf(type: { group: string; version: string }): string {
  return type.group ? `${type.group}/${type.version}` : type.version;
}

export function sameType(a: { group: string; resource: string }, b: { group: string; resource: string }): boolean {
  return a.group === b.group && a.resource === b.resource;
}

export interface TypeReference {
  readonly group: string;
  readonly version?: string | undefined;
  readonly resource?: string | undefined;
  readonly kind?: string | undefined;
}

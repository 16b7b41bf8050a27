/**
 * Which type a related rule may write for its source's: the same type, or a
 * Secret for a ConfigMap and back, whose content relsync converts because
 * Kubernetes defines what it means (sync/content-conversion.ts). Any other
 * pair (a ConfigMap as some CRD, one CRD as another, one version as another)
 * is refused here, when the config is loaded, at the path of the field that
 * names it: not by the API server at write time, and never written with
 * content that means something else in the other type.
 */
import { typeName, type TypeReference } from '../core/resource-type.js';

/** The core types whose content relsync converts into each other: kind → resource. */
const payloadTypes: ReadonlyMap<string, string> = new Map([['ConfigMap', 'configmaps'], ['Secret', 'secrets']]);
const payloadResources = new Set(payloadTypes.values());

/** Whether both types are ConfigMaps or Secrets (the same or not): their content converts. */
export function isPayloadPair(a: { group: string; resource: string }, b: { group: string; resource: string }): boolean {
  return a.group === '' && b.group === '' && payloadResources.has(a.resource) && payloadResources.has(b.resource);
}

/** Why a rule whose source is `source` may not write `destination`, or undefined when it may. */
export function destinationTypeProblem(source: TypeReference, destination: TypeReference): string | undefined {
  const [s, d] = [describe(source), describe(destination)];
  // A version left out is each API server's preferred one; two given must agree.
  if (source.version !== undefined && destination.version !== undefined && source.version !== destination.version) {
    return `${s} and ${d} are different versions, and relsync copies fields as they are, without converting between versions; give one version, or leave it out of the destination`;
  }
  const [sp, dp] = [payloadResource(source), payloadResource(destination)];
  if (sp !== undefined && dp !== undefined) return undefined;
  const refused = `relsync copies a related object as its own type, or converts between ConfigMaps and Secrets (whose content Kubernetes defines); it cannot copy ${s} as ${d}: leave "destination" out to copy the source's type`;
  // A ConfigMap or a Secret on one side only: the other is some other type, however it is given.
  if (sp !== undefined || dp !== undefined || source.group !== destination.group) return refused;
  if (source.resource !== undefined && destination.resource !== undefined) return source.resource === destination.resource ? undefined : refused;
  if (source.kind !== undefined && destination.kind !== undefined) return source.kind === destination.kind ? undefined : refused;
  // One by resource, the other by kind: only discovery could tell whether they are the same type.
  return `cannot tell before discovery whether ${d} is the same type as ${s}; give the destination by "${source.resource !== undefined ? 'resource' : 'kind'}" as the source is, or leave "destination" out to copy the source's type`;
}

/** `configmaps` or `secrets` for a ConfigMap or Secret however given (resource or kind), else undefined. */
function payloadResource(type: TypeReference): string | undefined {
  if (type.group !== '') return undefined;
  if (type.resource !== undefined) return payloadResources.has(type.resource) ? type.resource : undefined;
  return type.kind === undefined ? undefined : payloadTypes.get(type.kind);
}

/** `secrets`, `kind Widget.example.com`, `databases.example.com/v1`: a type as the config gives it. */
function describe(type: TypeReference): string {
  const name = type.resource !== undefined ? typeName({ group: type.group, resource: type.resource }) : `kind ${typeName({ group: type.group, resource: type.kind ?? '?' })}`;
  return type.version === undefined ? name : `${name}/${type.version}`;
}

/**
 * JSON text of any value relsync parsed from JSON, however deeply nested.
 * V8's JSON.parse does not recurse, but JSON.stringify and a recursive walk
 * do: they overflow the call stack at a few thousand levels, and an API
 * server accepts objects about 10,000 levels deep (kube-apiserver v1.36:
 * a custom resource that keeps unknown fields). These serializers keep a
 * stack of their own.
 */

/** JSON.stringify's text; where the native serializer runs out of stack, the same text made without recursion. */
export function jsonText(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    return serialize(value, false);
  }
}

/**
 * JSON with object keys sorted (code-unit order) and undefined members left out: the same value
 * always gives the same text, whatever order its keys came in (content hashes, comparisons).
 */
export function sortedJsonText(value: unknown): string {
  return serialize(value, true);
}

/** An array or object whose members are being written: its members, the keys for an object's. */
interface Open {
  readonly close: string;
  readonly keys: readonly string[] | undefined;
  readonly values: readonly unknown[];
  next: number;
}

/**
 * As JSON.stringify for parsed JSON (strings, numbers, booleans, null, arrays, plain objects): an
 * object's undefined members are left out, an array's are null; anything JSON cannot say is null.
 */
function serialize(value: unknown, sorted: boolean): string {
  let out = '';
  const stack: Open[] = [];
  const write = (v: unknown): void => {
    if (v === null || typeof v !== 'object') {
      out += JSON.stringify(v) ?? 'null';
      return;
    }
    if (isLeaf(v, sorted)) {
      out += JSON.stringify(v);
      return;
    }
    if (Array.isArray(v)) {
      out += '[';
      stack.push({ close: ']', keys: undefined, values: v, next: 0 });
      return;
    }
    const entries = Object.entries(v as Record<string, unknown>).filter(([, member]) => member !== undefined);
    if (sorted) entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    out += '{';
    stack.push({ close: '}', keys: entries.map(([k]) => k), values: entries.map(([, member]) => member), next: 0 });
  };
  write(value);
  while (stack.length > 0) {
    const open = stack[stack.length - 1]!;
    if (open.next === open.values.length) {
      out += open.close;
      stack.pop();
      continue;
    }
    if (open.next > 0) out += ',';
    if (open.keys) out += `${JSON.stringify(open.keys[open.next])}:`;
    write(open.values[open.next++]);
  }
  return out;
}

/**
 * Whether the native serializer writes `v` exactly as serialize would, in one call: an array of
 * primitives, or an object of primitive members whose keys already come in code-unit order (when
 * sorting). A wide list of names is the common case, and one native call instead of one per
 * element is several times faster on it. Integer-like keys come first in any object, in numeric
 * order ("9" before "10"), so they fail the order check and take the walk. Undefined members: the
 * native serializer leaves an object's out and writes an array's as null, as serialize does.
 */
function isLeaf(v: object, sorted: boolean): boolean {
  if (Array.isArray(v)) {
    for (const element of v as unknown[]) if (!isPrimitive(element)) return false;
    return true;
  }
  let previous: string | undefined;
  for (const key in v) {
    if (!isPrimitive((v as Record<string, unknown>)[key])) return false;
    if (sorted && previous !== undefined && !(previous < key)) return false;
    previous = key;
  }
  return true;
}

/** What JSON.parse makes that is not a container (undefined: a member taken out of a parsed object). */
function isPrimitive(v: unknown): boolean {
  return v === null || v === undefined || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
}

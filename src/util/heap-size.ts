/**
 * About how many bytes a parsed JSON value takes in V8's heap (64-bit, no
 * pointer compression, as Node.js runs). Not exact: close enough to budget
 * memory by, and never far below the truth for shapes a tenant could choose
 * to make it so — a ConfigMap of many tiny keys takes several times its JSON
 * text, a single long string about its length (twice for text beyond
 * Latin-1). Walks with a stack of its own: a deeply nested custom resource
 * cannot overflow the call stack.
 */
const HEADER = 24;
const PROPERTY = 24;
const SLOT = 8;

export function approximateHeapBytes(value: unknown): number {
  let total = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v === 'string') total += HEADER + stringBytes(v);
    else if (v === null || typeof v !== 'object') total += 16;
    else if (Array.isArray(v)) {
      total += HEADER + SLOT * v.length;
      for (const item of v) pending.push(item);
    } else {
      total += HEADER + 32;
      for (const [key, item] of Object.entries(v)) {
        total += PROPERTY + HEADER + key.length;
        pending.push(item);
      }
    }
  }
  return total;
}

// eslint-disable-next-line no-control-regex
const beyondLatin1 = /[^\u0000-\u00ff]/;

/** The bytes a string's characters take in V8's heap: one each for Latin-1 text, two for any other. */
export function stringBytes(s: string): number {
  return beyondLatin1.test(s) ? 2 * s.length : s.length;
}

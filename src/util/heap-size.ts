/**
 * About how many bytes a parsed JSON value takes in V8's heap (64-bit, no
 * pointer compression, as Node.js runs). Not exact: close enough to budget
 * memory by, and never far below the truth for shapes a tenant could choose
 * to make it so — a ConfigMap of many tiny keys takes several times its JSON
 * text, a single long string about its length (twice for text beyond Latin-1).
 */
const HEADER = 24;
const PROPERTY = 24;
const SLOT = 8;

export function approximateHeapBytes(value: unknown): number {
  if (typeof value === 'string') return HEADER + (isLatin1(value) ? value.length : 2 * value.length);
  if (value === null || typeof value !== 'object') return 16;
  if (Array.isArray(value)) {
    let n = HEADER + SLOT * value.length;
    for (const item of value) n += approximateHeapBytes(item);
    return n;
  }
  let n = HEADER + 32;
  for (const [key, item] of Object.entries(value)) n += PROPERTY + HEADER + key.length + approximateHeapBytes(item);
  return n;
}

// eslint-disable-next-line no-control-regex
const beyondLatin1 = /[^\u0000-\u00ff]/;

function isLatin1(s: string): boolean {
  return !beyondLatin1.test(s);
}

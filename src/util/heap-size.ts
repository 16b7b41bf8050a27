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

/**
 * Heap a JSON text at most takes once parsed, told from the text alone (before JSON.parse, which
 * cannot be stopped half way). Every value costs its text plus at most ~64 bytes; values are
 * counted by the `{`, `[`, `,` and `:` outside strings. Measured on Node 20 (8 MiB texts):
 * `[{},{},…]` parses to 179 MiB (22× its text), nested arrays to 232 MiB, distinct keys to 105 MiB;
 * this says 349, 264 and 117 (bench/parse-cost.ts). An API server's ordinary LIST page says ~4× what it takes, a long
 * string its length. Linear, one pass; strings are skipped whole.
 */
export function parsedBytesAtMost(text: string): number {
  let tokens = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= KIND.length) continue;
    const kind = KIND[c];
    if (kind === VALUE) tokens++;
    else if (kind === STRING) {
      i = stringEnd(text, i);
      if (i < 0) break;
    }
  }
  return text.length * (twoByte.test(text) ? 2 : 1) + PER_VALUE * tokens;
}

/**
 * parsedBytesAtMost(text) when it is over `max`, otherwise undefined; a text too short to say more
 * than `max` is not scanned. Short by what it can say, not by what it can take (V8 takes at most
 * ~29 times a text's length, it says up to 66): a GET of one object and a LIST page of that object
 * alone are refused alike (a 1.75 MiB custom resource of `[]` says 43 times its length).
 */
export function parsedBytesOver(text: string, max: number): number | undefined {
  if (text.length * MOST_SAID_PER_CHARACTER <= max) return undefined;
  const said = parsedBytesAtMost(text);
  return said > max ? said : undefined;
}
/** Text V8 keeps two bytes a character once parsed: a character beyond Latin-1, raw or escaped (`\u0100`). */
// eslint-disable-next-line no-control-regex
const twoByte = /[^\u0000-\u00ff]|\\u(?!00)/i;

const PER_VALUE = 64;
/** The most parsedBytesAtMost says of one character: a value's 64 bytes and two bytes of text. */
const MOST_SAID_PER_CHARACTER = PER_VALUE + 2;
const BACKSLASH = 0x5c;
const VALUE = 1;
const STRING = 2;
/** By character code below 128: VALUE for `{`, `[`, `,` and `:`, STRING for `"`. */
const KIND = new Uint8Array(128);
for (const c of '{[,:') KIND[c.charCodeAt(0)] = VALUE;
KIND['"'.charCodeAt(0)] = STRING;

/** Index of the quote that closes the string opened at `open`; -1 when it never closes. */
function stringEnd(text: string, open: number): number {
  for (let i = text.indexOf('"', open + 1); i >= 0; i = text.indexOf('"', i + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(i - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return i;
  }
  return -1;
}

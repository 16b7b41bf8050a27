/**
 * A tenant's value as it may appear in a message: quoted, control and
 * invisible characters escaped, and at most a short prefix of it. Messages
 * go to logs, Events, the primary's condition, the store and `relsync
 * inspect`; a value quoted whole made a 1 MB field a 1 MB log line and a
 * 1 MB row loaded at every start (issue #36), and a raw escape sequence
 * could rewrite the terminal of whoever reads it.
 */

/** Characters of a value kept in a message; the rest is counted, not shown. */
export const QUOTED_PREFIX = 64;

// C0 and C1 controls, DEL, and the invisible or reordering format characters (bidi overrides,
// zero-width, line and paragraph separators, BOM) that can disguise what a reader sees.
// eslint-disable-next-line no-control-regex -- control characters are what it finds
const hidden = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/g;

/** `text` with control and invisible characters as \uXXXX escapes: it cannot forge lines or hide text. */
export function escapeHidden(text: string): string {
  return text.replace(hidden, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** `value` in double quotes, escaped, cut to `max` characters with the length of what was cut. */
export function quote(value: string, max = QUOTED_PREFIX): string {
  const cut = value.length > max;
  // Not in the middle of a surrogate pair: the cut prefix stays valid text.
  let end = cut ? max : value.length;
  if (cut && /[\ud800-\udbff]/.test(value.charAt(end - 1))) end--;
  const shown = escapeHidden(value.slice(0, end).replaceAll('\\', '\\\\').replaceAll('"', '\\"'));
  return cut ? `"${shown}"… (${value.length} characters)` : `"${shown}"`;
}

/** A message cut to at most `max` characters (a stored message, a condition), saying how long it was. */
export function capped(text: string, max: number): string {
  if (text.length <= max) return text;
  // Not between the halves of a surrogate pair: a lone half is stored as U+FFFD and would never compare equal again.
  const end = /[\ud800-\udbff]/.test(text.charAt(max - 1)) ? max - 1 : max;
  return `${text.slice(0, end)}… (${text.length} characters)`;
}

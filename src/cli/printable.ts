/** Text for a terminal: control and bidi characters (a tenant's names and values may hold them) as escapes, so output cannot forge lines or hide text. */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what it finds
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}


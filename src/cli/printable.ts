import { escapeHidden } from '../core/quote.js';

/** Text for a terminal: control and invisible characters (a tenant's names and values may hold them) as escapes, so output cannot forge lines or hide text. */
export function printable(text: string): string {
  return escapeHidden(text);
}

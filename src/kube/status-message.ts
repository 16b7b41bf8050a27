/**
 * What of an API server's Status message relsync repeats (in logs, Events
 * and the store). The message quotes what the request carried: a copy's
 * fields, a Secret's keys, labels — and a copy is written from a tenant's
 * objects, Secrets among them. So every double-quoted string is left out
 * (`"…"`), whatever the shape around it (`Invalid value: "…"`,
 * `Unsupported value`, `Duplicate value`, a CRD's type and format checks, a
 * CEL rule's or an admission policy's own message), as are an unquoted value
 * after `Invalid value:`, `Unsupported value:`, `Duplicate value:` or `Not
 * found:` (a number, a boolean, a Go dump) and a field path's map keys
 * (`data[…]`; list indexes stay). Kept: the names the request's path already
 * says (the object, its namespace, the resource) and the Status's
 * `details.name`, an admission webhook's name, and the values a `supported
 * values:` list offers (the schema's, not the request's).
 *
 * Not recognised: a value a webhook or policy writes without quotes, and a
 * map key in a dotted field path (`spec.config.<key>`, as CRD schemas name
 * them). The result has control and invisible characters escaped and is cut
 * to MAX_STATUS_MESSAGE characters. One pass over the text, no regex: linear
 * in the message's length whatever it holds (it may be 64 KiB of a tenant's
 * API server's answer).
 */
import { capped, escapeHidden } from '../core/quote.js';

/** Characters of a Status message repeated. */
export const MAX_STATUS_MESSAGE = 500;

/** What precedes the values a schema's enum allows (apimachinery's field.NotSupported). */
const CHOICES = 'supported values: ';

/** What stands for a value left out. */
const HIDDEN = '…';

/** field.ErrorType strings that a value follows (apimachinery's field.Error.ErrorBody). */
const VALUE_TYPES = ['Invalid value: ', 'Unsupported value: ', 'Duplicate value: ', 'Not found: '] as const;

/**
 * `message` without the values it quotes. `known`: strings the caller may repeat because they are
 * said already (the request path's segments, the Status's details.name).
 */
export function withoutValues(message: string, known: ReadonlySet<string>): string {
  let out = '';
  let i = 0;
  /** Inside a `supported values:` list: quoted strings there are the schema's choices. */
  let choices = false;
  /** The index of the next `]` at or after the last `[` looked at; -1: there is none. */
  let close = 0;
  while (i < message.length) {
    const c = message[i]!;
    if (c === '"') {
      const end = quotedEnd(message, i);
      const text = message.slice(i, end);
      const inner = unquote(text);
      const keep = choices || known.has(inner) || message.endsWith('admission webhook ', i);
      out += keep ? text : `"${HIDDEN}"`;
      i = end;
      continue;
    }
    // The next `]`, found again only once passed (one scan of the text in all, whatever it holds).
    if (c === '[' && close !== -1 && close <= i) close = message.indexOf(']', i + 1);
    const subscript = c === '[' && i > 0 && isWordOrClose(message[i - 1]!) ? close : -1;
    // A field path's subscript (`data[key]:`, `spec.list[0].name`), followed by what follows a path;
    // not a Go type's `map[string]interface` or a regex's `[a-z]*`: an index stays, a map key (the tenant's) does not.
    if (subscript > i && AFTER_PATH.includes(message[subscript + 1] ?? '')) {
      const inner = message.slice(i + 1, subscript);
      out += /^\d+$/.test(inner) ? `[${inner}]` : `[${HIDDEN}]`;
      i = subscript + 1;
      continue;
    }
    const type = VALUE_TYPES.find((t) => message.startsWith(t, i));
    if (type) {
      out += type;
      i += type.length;
      choices = false;
      const end = unquotedValueEnd(message, i);
      if (end !== undefined) {
        out += HIDDEN;
        i = end;
      }
      continue;
    }
    if (message.startsWith(CHOICES, i)) {
      out += CHOICES;
      i += CHOICES.length;
      choices = true;
      continue;
    }
    // A list of choices ends with its field error: at the next error's `: `, a `]` or a `;`.
    if (choices && (c === ']' || c === ';' || (c === ':' && message[i + 1] === ' '))) choices = false;
    out += c;
    i++;
  }
  return capped(escapeHidden(out), MAX_STATUS_MESSAGE);
}

const isWordOrClose = (c: string) => c === ']' || /\w/.test(c);
/** What may follow a field path's subscript ('' : the end of the message). */
const AFTER_PATH = ['', ':', '.', '[', ',', ']', ')', ' '];

/** The request path's segments (decoded): the names a message may repeat, since the path says them. */
export function pathSegments(path: string): Set<string> {
  const segments = new Set<string>();
  for (const part of path.split('?', 1)[0]!.split('/')) {
    if (part === '') continue;
    try {
      segments.add(decodeURIComponent(part));
    } catch {
      segments.add(part);
    }
  }
  return segments;
}

/** The index just past the Go-quoted string that opens at `start` (its closing quote, or the end of the text). */
function quotedEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i + 1;
  }
  return text.length;
}

/** A quoted string's content, with Go's escapes of quotes and backslashes undone (enough to compare names). */
function unquote(quoted: string): string {
  const inner = quoted.endsWith('"') && quoted.length > 1 ? quoted.slice(1, -1) : quoted.slice(1);
  return inner.replaceAll('\\"', '"').replaceAll('\\\\', '\\');
}

/**
 * Where an unquoted value that starts at `start` ends, or undefined when what follows is no value
 * but the error's own words (`Invalid value: token "…" must start with ok`: a value the server
 * left out itself). A value is one word (`12345`, `true`, `1Gi`) followed by the error's detail
 * (`: `), the next error (`, `), the end of a list (`]`) or the end of the message; or a Go dump
 * (`map[string]interface {}{"k":"v"}`), whose brackets make it a value whatever follows. Words
 * without brackets are scanned once more by the caller, the rest never: linear in all.
 */
function unquotedValueEnd(text: string, start: number): number | undefined {
  if (start >= text.length || text[start] === '"' || text[start] === ' ') return undefined;
  let depth = 0;
  let bracketed = false;
  let i = start;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"') {
      i = quotedEnd(text, i);
      continue;
    }
    if (c === '{' || c === '[' || c === '(') {
      depth++;
      bracketed = true;
    } else if ((c === '}' || c === ']' || c === ')') && depth > 0) depth--;
    else if (depth === 0 && (c === ']' || ((c === ':' || c === ',') && text[i + 1] === ' '))) break;
    else if (depth === 0 && c === ' ') {
      // Go's `interface {}` is one word of a dump's type.
      if (text.startsWith(' {}', i) && text.endsWith('interface', i)) {
        i += 3;
        continue;
      }
      return bracketed ? i : undefined;
    }
    i++;
  }
  return i > start ? i : undefined;
}

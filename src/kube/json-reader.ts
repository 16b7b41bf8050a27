/**
 * A cursor over JSON text that reads chosen members and skips the others' values whole: one pass,
 * a stack of nothing (containers are skipped by counting brackets outside strings), nothing parsed
 * but the strings read. For answers too costly to parse (watch-event-head.ts, metadata-page-head.ts):
 * what they are about is read off the text.
 */
import type { ObjectMeta } from '../core/object.js';
import { LOGICAL_CLUSTER_ANNOTATION } from './kcp-endpoint.js';

/** The metadata fields readIdentity() reads; every other one is skipped. */
const IDENTITY_FIELDS = ['name', 'namespace', 'uid', 'resourceVersion'] as const;

/**
 * The longest identity field a real API server sends (a name of 253 characters; uids and
 * resourceVersions are shorter): a longer one is not an API server's, and is not kept or logged.
 */
const MAX_IDENTITY_LENGTH = 253;

/**
 * Reads an object's metadata at the cursor: its name, namespace, uid, resourceVersion and kcp's
 * logical cluster annotation, skipping labels, annotations and the rest unparsed. Undefined when
 * the text is not such an object or a field is longer than any API server's.
 */
export function readIdentity(reader: Reader): ObjectMeta | undefined {
  const read: Record<string, unknown> = {};
  let tooLong = false;
  const ok = reader.members((name) => {
    if ((IDENTITY_FIELDS as readonly string[]).includes(name)) {
      const value = reader.stringValue();
      // A repeated key: the last one counts, as JSON.parse has it. Not a string: left out.
      if (value === undefined) {
        delete read[name];
        return reader.passValue();
      }
      tooLong ||= value.length > MAX_IDENTITY_LENGTH;
      read[name] = value;
      return true;
    }
    if (name !== 'annotations' || !reader.atObject()) return reader.passValue();
    const annotations: Record<string, string> = {};
    read.annotations = annotations;
    return reader.members((annotation) => {
      if (annotation !== LOGICAL_CLUSTER_ANNOTATION) return reader.passValue();
      const value = reader.stringValue();
      if (value === undefined) return reader.passValue();
      tooLong ||= value.length > MAX_IDENTITY_LENGTH;
      annotations[annotation] = value;
      return true;
    });
  });
  return ok && !tooLong ? (read as ObjectMeta) : undefined;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** A cursor over JSON text that reads chosen members and skips the others' values whole. */
export class Reader {
  private at = 0;

  constructor(private readonly text: string) {}

  /**
   * Reads an object's members, calling `member` at each key with the cursor on its value; `member`
   * reads or skips the value and says whether the text is still as expected. False when it is not.
   */
  members(member: (key: string) => boolean): boolean {
    if (!this.expect('{')) return false;
    if (this.peek() === '}') return this.expect('}');
    for (;;) {
      const key = this.stringValue();
      if (key === undefined || !this.expect(':') || !member(key)) return false;
      const next = this.peek();
      if (next === '}') return this.expect('}');
      if (!this.expect(',')) return false;
    }
  }

  /**
   * Reads an array's elements, calling `element` at each with the cursor on it; `element` reads or
   * skips it and says whether the text is still as expected. False when it is not.
   */
  elements(element: () => boolean): boolean {
    if (!this.expect('[')) return false;
    if (this.peek() === ']') return this.expect(']');
    for (;;) {
      if (!element()) return false;
      const next = this.peek();
      if (next === ']') return this.expect(']');
      if (!this.expect(',')) return false;
    }
  }

  /** Whether nothing but white space is left: the text was one value. */
  atEnd(): boolean {
    return this.peek() === undefined;
  }

  /** Whether the value at the cursor is an object. */
  atObject(): boolean {
    return this.peek() === '{';
  }

  /** A string value, or undefined when the value is not a string. */
  stringValue(): string | undefined {
    this.space();
    if (this.text.charCodeAt(this.at) !== QUOTE) return undefined;
    const end = this.stringEnd(this.at);
    if (end < 0) return undefined;
    const value = JSON.parse(this.text.slice(this.at, end + 1)) as string;
    this.at = end + 1;
    return value;
  }

  /** The text of the value at the cursor, which it moves past; undefined when the value does not end. */
  valueText(): string | undefined {
    this.space();
    const start = this.at;
    return this.passValue() ? this.text.slice(start, this.at) : undefined;
  }

  /** Moves past the value at the cursor; false when it does not end. */
  passValue(): boolean {
    this.space();
    const c = this.text.charCodeAt(this.at);
    if (c === QUOTE) {
      const end = this.stringEnd(this.at);
      this.at = end + 1;
      return end >= 0;
    }
    if (c === 0x7b || c === 0x5b) {
      let depth = 0;
      for (; this.at < this.text.length; this.at++) {
        const d = this.text.charCodeAt(this.at);
        if (d === QUOTE) {
          const end = this.stringEnd(this.at);
          if (end < 0) return false;
          this.at = end;
        } else if (d === 0x7b || d === 0x5b) depth++;
        else if (d === 0x7d || d === 0x5d) {
          if (--depth === 0) {
            this.at++;
            return true;
          }
        }
      }
      return false;
    }
    // A number, true, false or null: up to the next delimiter.
    const start = this.at;
    while (this.at < this.text.length && !',}] \t\r\n'.includes(this.text[this.at]!)) this.at++;
    return this.at > start;
  }

  private peek(): string | undefined {
    this.space();
    return this.text[this.at];
  }

  private expect(c: string): boolean {
    if (this.peek() !== c) return false;
    this.at++;
    return true;
  }

  private space(): void {
    while (this.at < this.text.length && ' \t\r\n'.includes(this.text[this.at]!)) this.at++;
  }

  /** Index of the quote that closes the string opened at `open`; -1 when it never closes. */
  private stringEnd(open: number): number {
    for (let i = this.text.indexOf('"', open + 1); i >= 0; i = this.text.indexOf('"', i + 1)) {
      let backslashes = 0;
      while (this.text.charCodeAt(i - 1 - backslashes) === BACKSLASH) backslashes++;
      if (backslashes % 2 === 0) return i;
    }
    return -1;
  }
}

/**
 * What a watch event is about, read from its line without parsing the rest: its `type` and its
 * object's identity (name, namespace, uid, resourceVersion, and kcp's logical cluster annotation).
 * For a line too costly to parse whole (list-watch.ts), so that the loop can say which object it
 * refused and go on, instead of listing again. One pass over the text, a stack of nothing
 * (containers are skipped by counting brackets outside strings): nothing else of the metadata is
 * parsed, so labels or annotations of any size cost a scan, never the heap they would take parsed.
 */
import type { ObjectMeta } from '../core/object.js';
import { LOGICAL_CLUSTER_ANNOTATION } from './kcp-endpoint.js';

export interface WatchEventHead {
  readonly type: string;
  readonly metadata: ObjectMeta;
}

/** The metadata fields read; every other one is skipped. */
const IDENTITY_FIELDS = new Set(['name', 'namespace', 'uid', 'resourceVersion']);

/** The event's type and its object's identity, or undefined when the line is not an object with both. */
export function watchEventHead(line: string): WatchEventHead | undefined {
  const reader = new Reader(line);
  let type: string | undefined;
  let metadata: Record<string, unknown> | undefined;
  const ok = reader.members((key) => {
    if (key === 'type') type = reader.stringValue();
    else if (key === 'object') {
      return reader.members((field) => {
        if (field !== 'metadata') return reader.skip();
        // A repeated key: the last one counts, as JSON.parse has it.
        const read: Record<string, unknown> = {};
        metadata = read;
        return reader.members((name) => {
          if (IDENTITY_FIELDS.has(name)) return (read[name] = reader.stringValue()) !== undefined || reader.skip();
          if (name !== 'annotations' || !reader.atObject()) return reader.skip();
          const annotations: Record<string, string> = {};
          read.annotations = annotations;
          return reader.members((annotation) => {
            if (annotation !== LOGICAL_CLUSTER_ANNOTATION) return reader.skip();
            const value = reader.stringValue();
            if (value !== undefined) annotations[annotation] = value;
            return value !== undefined || reader.skip();
          });
        });
      });
    } else return reader.skip();
    return type !== undefined;
  });
  if (!ok || type === undefined || metadata === undefined) return undefined;
  // Fields that were not strings are left out (and a name that is not one is no name).
  for (const field of IDENTITY_FIELDS) if (typeof metadata[field] !== 'string') delete metadata[field];
  return { type, metadata: metadata as ObjectMeta };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** A cursor over JSON text that reads chosen members and skips the others' values whole. */
class Reader {
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

  /** The text of the value at the cursor (moved past it), or undefined when it does not end. */
  valueText(): string | undefined {
    this.space();
    const start = this.at;
    return this.skip() ? this.text.slice(start, this.at) : undefined;
  }

  /** Moves past the value at the cursor; false when it does not end. */
  skip(): boolean {
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

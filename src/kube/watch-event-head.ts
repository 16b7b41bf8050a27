/**
 * What a watch event is about, read from its line without parsing the rest: its `type` and its
 * object's `metadata` (without managedFields). For a line too costly to parse whole (list-watch.ts),
 * so that the loop can say which object it refused and go on, instead of listing again. One pass
 * over the text, a stack of nothing (containers are skipped by counting brackets outside strings):
 * no line can make it use more than the metadata it parses.
 */
import type { ObjectMeta } from '../core/object.js';
import { parsedBytesOver } from '../util/heap-size.js';

export interface WatchEventHead {
  readonly type: string;
  readonly metadata: ObjectMeta;
}

/**
 * The event's type and its object's metadata, or undefined when the line is not an object with
 * both, or its metadata alone would take more than `maxParsedBytes` once parsed.
 */
export function watchEventHead(line: string, maxParsedBytes: number): WatchEventHead | undefined {
  const reader = new Reader(line);
  let type: string | undefined;
  let metadata: ObjectMeta | undefined;
  const ok = reader.members((key) => {
    if (key === 'type') type = reader.stringValue();
    else if (key === 'object') {
      return reader.members((field) => {
        if (field !== 'metadata') return reader.skip();
        const text = reader.valueText();
        if (text === undefined || parsedBytesOver(text, maxParsedBytes) !== undefined) return false;
        const value: unknown = JSON.parse(text);
        if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
        metadata = value as ObjectMeta;
        delete metadata.managedFields;
        return true;
      });
    } else return reader.skip();
    return type !== undefined;
  });
  return ok && type !== undefined && metadata !== undefined ? { type, metadata } : undefined;
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

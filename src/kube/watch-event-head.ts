/**
 * What a watch event is about, read from its line without parsing the rest: its `type` and its
 * object's identity (json-reader.ts readIdentity). For a line too costly to parse whole
 * (list-watch.ts), so that the loop can say which object it refused and go on, instead of listing
 * again: labels or annotations of any size cost a scan, never the heap they would take parsed.
 */
import type { ObjectMeta } from '../core/object.js';
import { readIdentity, Reader } from './json-reader.js';

export interface WatchEventHead {
  readonly type: string;
  readonly metadata: ObjectMeta;
}

/** The event's type and its object's identity, or undefined when the line is not an object with both. */
export function watchEventHead(line: string): WatchEventHead | undefined {
  const reader = new Reader(line);
  let type: string | undefined;
  let metadata: ObjectMeta | undefined;
  const ok = reader.members((key) => {
    if (key === 'type') type = reader.stringValue();
    else if (key === 'object') {
      // A repeated key: the last one counts, as JSON.parse has it.
      metadata = undefined;
      return reader.members((field) => {
        if (field !== 'metadata') return reader.passValue();
        metadata = readIdentity(reader);
        return metadata !== undefined;
      });
    } else return reader.passValue();
    return type !== undefined;
  });
  return ok && reader.atEnd() && type !== undefined && metadata !== undefined ? { type, metadata } : undefined;
}

/**
 * What a watch event is about, read from its line without parsing the rest: its `type` and its
 * object's identity (json-reader.ts readIdentity). For a line too costly to parse whole
 * (list-watch.ts), so that the loop can say which object it refused and go on, instead of listing
 * again: labels or annotations of any size cost a scan, never the heap they would take parsed.
 * And a deletion's object as what is read of it, its metadata (deletedObject).
 */
import type { KubeObject, ObjectMeta } from '../core/object.js';
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

/**
 * The type and identity of an ADDED or MODIFIED event, read off its line without parsing the
 * content: for telling relsync's own writes' events from the rest before paying for their content
 * (list-watch.ts). The whole line is scanned, and one that JSON.parse could read otherwise (a
 * repeated `type`, `object` or `metadata`: the last would count there) or that is not one value
 * says nothing; the content's own well-formedness is not checked (only brackets are counted).
 */
export function changeHead(line: string): WatchEventHead | undefined {
  const reader = new Reader(line);
  let type: string | undefined;
  let metadata: ObjectMeta | undefined;
  const seen = new Set<string>();
  const once = (key: string): boolean => {
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  };
  const ok = reader.members((key) => {
    if (key === 'type') return once(key) && (type = reader.stringValue()) !== undefined;
    if (key !== 'object') return reader.passValue();
    return once(key) && reader.members((field) => {
      if (field !== 'metadata') return reader.passValue();
      return once(field) && (metadata = readIdentity(reader)) !== undefined;
    });
  });
  if (!ok || !reader.atEnd() || (type !== 'ADDED' && type !== 'MODIFIED') || metadata?.name === undefined) return undefined;
  return { type, metadata };
}

/** A DELETED event's object, its content left unparsed. */
export interface DeletedObject {
  /** The metadata's text: what the parse budget is charged for, before read() parses it. */
  readonly metadataText: string;
  /** The object as its apiVersion, kind and metadata; undefined when the metadata is not an object. */
  read(): KubeObject | undefined;
}

/**
 * The object of a DELETED event as its apiVersion, kind and metadata, the rest of the line scanned
 * and not parsed: what a deletion is routed by is its metadata (identity, labels, annotations,
 * owner references), and a tenant's deleted object of a megabyte then costs a scan instead of a
 * parse of the whole object (for each of the copy's and the primary's events). Undefined for any
 * other line, or one that is not an object with metadata and string apiVersion and kind (it is then
 * parsed, and charged, as any other line). The content's well-formedness is not checked (only
 * brackets are counted): it is never read.
 */
export function deletedObject(line: string): DeletedObject | undefined {
  // An API server writes the type first; anything else takes the general path.
  if (!/^\s*\{\s*"type"\s*:\s*"DELETED"/.test(line)) return undefined;
  const reader = new Reader(line);
  let type: string | undefined;
  let fields: Record<string, string> | undefined;
  const ok = reader.members((key) => {
    if (key === 'type') type = reader.stringValue();
    else if (key === 'object') {
      // A repeated key: the last one counts, as JSON.parse has it.
      const read: Record<string, string> = {};
      fields = read;
      return reader.members((field) => {
        if (field !== 'metadata' && field !== 'apiVersion' && field !== 'kind') return reader.passValue();
        // apiVersion and kind are strings, or the line is read whole: only the metadata is charged.
        const text = field === 'metadata' ? reader.valueText() : stringText(reader);
        if (text === undefined) return false;
        read[field] = text;
        return true;
      });
    } else return reader.passValue();
    return type !== undefined;
  });
  const texts = fields;
  if (!ok || !reader.atEnd() || type !== 'DELETED' || texts?.metadata === undefined) return undefined;
  return {
    metadataText: texts.metadata,
    read: () => {
      const object: Record<string, unknown> = {};
      for (const [field, text] of Object.entries(texts)) object[field] = JSON.parse(text) as unknown;
      const metadata = object.metadata;
      return metadata !== null && typeof metadata === 'object' && !Array.isArray(metadata) ? (object as unknown as KubeObject) : undefined;
    },
  };
}

/** The JSON text of a string value at the cursor (moved past it); undefined when it is not a string. */
function stringText(reader: Reader): string | undefined {
  const value = reader.stringValue();
  return value === undefined ? undefined : JSON.stringify(value);
}

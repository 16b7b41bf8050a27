/**
 * What a metadata-only LIST page of one object (PartialObjectMetadataList) says, read off its text
 * without parsing it: the object's identity (json-reader.ts readIdentity), the list's
 * resourceVersion and continue token. For the page of an object too costly to parse
 * (resource-client.ts refusedPage): its metadata alone may be costly too (a megabyte of labels of
 * tiny values), and is scanned, never parsed.
 */
import type { ObjectMeta } from '../core/object.js';
import { readIdentity, Reader } from './json-reader.js';

export interface MetadataPageHead {
  readonly items: readonly ObjectMeta[];
  readonly resourceVersion: string;
  readonly continueToken: string | undefined;
}

/** Undefined when the text is not such a list, or holds more than `maxItems` objects. */
export function metadataPageHead(text: string, maxItems: number): MetadataPageHead | undefined {
  const reader = new Reader(text);
  let items: ObjectMeta[] = [];
  let resourceVersion = '';
  let continueToken: string | undefined;
  const ok = reader.members((key) => {
    if (key === 'metadata') {
      return reader.members((field) => {
        if (field !== 'resourceVersion' && field !== 'continue') return reader.passValue();
        const value = reader.stringValue();
        if (value === undefined) return reader.passValue();
        if (field === 'resourceVersion') resourceVersion = value;
        else continueToken = value || undefined;
        return true;
      });
    }
    if (key !== 'items') return reader.passValue();
    items = [];
    return reader.elements(() => {
      if (items.length >= maxItems) return false;
      let metadata: ObjectMeta | undefined;
      const element = reader.members((field) => {
        if (field !== 'metadata') return reader.passValue();
        metadata = readIdentity(reader);
        return metadata !== undefined;
      });
      if (!element || !metadata) return false;
      items.push(metadata);
      return true;
    });
  });
  return ok && reader.atEnd() ? { items, resourceVersion, continueToken } : undefined;
}

/**
 * A related copy of another type than its source: its content converted where
 * Kubernetes defines what it means, and nowhere else. The one such pair is
 * ConfigMap ↔ Secret:
 *
 * - ConfigMap → Secret: `data` (UTF-8 text) is base64-encoded into the
 *   Secret's `data`, `binaryData` (already base64) goes there as it is; the
 *   copy is `type: Opaque`. `stringData` is never written: it is write-only
 *   (the API server folds it into `data` and never returns it), so a copy that
 *   had it would never read back as what relsync wrote.
 * - Secret → ConfigMap: a value whose bytes are valid UTF-8 goes to `data` as
 *   text, any other to `binaryData` (base64). The Secret's `type` has no place
 *   in a ConfigMap and is lost: a copy back to a Secret is `Opaque`.
 *
 * `immutable` carries over both ways. Labels and annotations are not touched.
 * An empty map is left out rather than written as `{}`: the API server drops
 * it, and the copy must read back exactly as it was written, because its
 * content hash (the event router's test for relsync's own writes) and the
 * up-to-date check compare what is read with what is written.
 *
 * Every other pair of differing types is refused at config load
 * (config/related-types.ts), so it never reaches this file.
 */
import { isUtf8 } from 'node:buffer';
import { isPayloadPair } from '../config/related-types.js';
import { sameType, typeName, type ResourceType } from '../core/resource-type.js';
import type { CopyContent } from './content.js';

type TypeRef = Pick<ResourceType, 'group' | 'resource'>;
type Fields = Record<string, unknown>;

/** `content` (of an object of type `from`) as the content of a copy of type `to`. */
export function convertContent(content: CopyContent, from: TypeRef, to: TypeRef): CopyContent {
  if (sameType(from, to)) return content;
  if (!isPayloadPair(from, to)) throw new Error(`relsync does not convert ${typeName(from)} to ${typeName(to)} (the config check should have refused this rule)`);
  return { ...content, fields: to.resource === 'secrets' ? configMapToSecret(content.fields) : secretToConfigMap(content.fields) };
}

function configMapToSecret(fields: Fields): Fields {
  const data: Record<string, string> = {};
  for (const [key, text] of Object.entries(stringMap(fields.data))) data[key] = Buffer.from(text, 'utf8').toString('base64');
  // A key in both maps: the API server refuses such a ConfigMap, so it comes only from a source
  // that was not validated. binaryData wins, as in the kubelet's projection of a ConfigMap volume.
  for (const [key, encoded] of Object.entries(stringMap(fields.binaryData))) data[key] = canonicalBase64(encoded);
  return { type: 'Opaque', ...nonEmpty('data', data), ...immutableOf(fields) };
}

function secretToConfigMap(fields: Fields): Fields {
  const data: Record<string, string> = {};
  const binaryData: Record<string, string> = {};
  // Only `data`: a Secret read from an API server has no stringData (see the header).
  for (const [key, encoded] of Object.entries(stringMap(fields.data))) {
    const bytes = Buffer.from(encoded, 'base64');
    // Buffer's UTF-8 decoding keeps a byte-order mark, so text → bytes gives back the same bytes.
    if (isUtf8(bytes)) data[key] = bytes.toString('utf8');
    else binaryData[key] = bytes.toString('base64');
  }
  return { ...nonEmpty('data', data), ...nonEmpty('binaryData', binaryData), ...immutableOf(fields) };
}

/** The string values of a map field; anything else (absent, malformed) reads as empty. */
function stringMap(value: unknown): Record<string, string> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return {};
  return Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** base64 as the API server writes it (standard alphabet, padded), so the copy reads back unchanged. */
function canonicalBase64(encoded: string): string {
  return Buffer.from(encoded, 'base64').toString('base64');
}

function nonEmpty(field: string, map: Record<string, string>): Fields {
  return Object.keys(map).length > 0 ? { [field]: map } : {};
}

function immutableOf(fields: Fields): Fields {
  return typeof fields.immutable === 'boolean' ? { immutable: fields.immutable } : {};
}

/**
 * An object's answer read as its apiVersion, kind, metadata and status, its content (spec, data,
 * anything else) scanned and never parsed: for the answer of a status write, which changed only
 * what it read back, so that a tenant's megabyte spec is not parsed again at each verdict. The
 * parts read are bounded as a whole answer is (util/heap-size.ts): too costly, and the answer is
 * refused, as connection.ts refuses one.
 */
import type { KubeObject } from '../core/object.js';
import { parsedBytesOver } from '../util/heap-size.js';
import { Reader } from './json-reader.js';

/** The fields read; a repeated one, the last (as JSON.parse has it). */
const READ = new Set(['apiVersion', 'kind', 'metadata', 'status']);

/**
 * The object's apiVersion, kind, metadata and status; undefined when the text is not an object
 * with metadata. Throws when the parts read would take more than `maxParsedBytes` once parsed.
 */
export function objectHead(text: string, maxParsedBytes: number): KubeObject | undefined {
  const reader = new Reader(text);
  const texts = new Map<string, string>();
  const ok = reader.members((key) => {
    if (!READ.has(key)) return reader.passValue();
    const value = reader.valueText();
    if (value === undefined) return false;
    texts.set(key, value);
    return true;
  });
  if (!ok || !reader.atEnd() || !texts.has('metadata')) return undefined;
  const said = parsedBytesOver([...texts.values()].join(','), maxParsedBytes);
  if (said !== undefined) throw new Error(`the answer's metadata and status would take about ${Math.round(said / 1024 / 1024)} MiB of memory once parsed, more than ${Math.round(maxParsedBytes / 1024 / 1024)} MiB (limits.parsedBytes)`);
  const object: Record<string, unknown> = {};
  for (const [key, value] of texts) {
    try {
      object[key] = JSON.parse(value) as unknown;
    } catch {
      // JSON.parse's message quotes the text, which may hold a tenant's values: its size only.
      throw new Error(`the answer's ${key} (${value.length} characters) is not JSON`);
    }
  }
  const metadata = object.metadata;
  return metadata !== null && typeof metadata === 'object' && !Array.isArray(metadata) ? (object as unknown as KubeObject) : undefined;
}

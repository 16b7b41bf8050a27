/**
 * A fingerprint of everything besides the objects that decides what a
 * primary's reconcile writes: its resource's config (types, selector, naming,
 * related rules), the copy policy, the limits, the agent's name, relsync's
 * version, and the content-hash key. A primary's last complete sync is stored
 * with it (store/records.ts PrimaryVersions): a sweep skips a primary whose
 * objects did not change only while the fingerprint is the same, so a changed
 * rule, an upgrade or a new key reconciles every primary once.
 */
import { readFileSync } from 'node:fs';
import type { CopyPolicy } from '../config/copy-policy.js';
import type { ContentHasher } from './content-hasher.js';
import type { ResolvedResource } from './resolved-config.js';

export class ConfigFingerprint {
  /** Each resource's serialized config, built once (the resources live as long as the process's config). */
  private readonly serialized = new WeakMap<ResolvedResource, string>();

  constructor(
    private readonly hasher: ContentHasher,
    private readonly shared: { readonly agentName: string; readonly policy: CopyPolicy; readonly limits: unknown },
  ) {}

  /** Keyed like content hashes: a new key (made again after it was lost) changes every fingerprint. */
  of(resource: ResolvedResource): string {
    let text = this.serialized.get(resource);
    if (text === undefined) {
      text = fingerprintJson({ version: relsyncVersion, ...this.shared, resource });
      this.serialized.set(resource, text);
    }
    return this.hasher.hashSerialized(text);
  }
}

/**
 * JSON with sorted keys in which what JSON.stringify drops still counts: a RegExp by its pattern
 * and flags, a function by its text (a compiled template's parts), undefined as null.
 */
export function fingerprintJson(value: unknown): string {
  if (value instanceof RegExp) return JSON.stringify(`/${value.source}/${value.flags}`);
  if (typeof value === 'function') return JSON.stringify(String(value));
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(fingerprintJson).join(',')}]`;
  if (value instanceof Set || value instanceof Map) return fingerprintJson([...value]);
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${fingerprintJson(v)}`).join(',')}}`;
}

/** package.json's version: two paths up from dist/src (also in the container image, see Dockerfile). */
const relsyncVersion = ((): string => {
  try {
    return (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
})();

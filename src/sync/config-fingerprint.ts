/**
 * A fingerprint of everything besides the objects that decides what a
 * primary's reconcile writes: its resource's config (types, selector, naming,
 * related rules), the copy policy, the limits, the agent's name, where
 * copies of each source namespace are pinned
 * (copy-namespaces.ts), relsync's own code, its libraries and Node.js, and
 * the content-hash key. A
 * primary's last complete sync is stored with it (store/records.ts
 * PrimaryVersions): a sweep skips a primary whose objects did not change only
 * while the fingerprint is the same, so a changed rule, another build of
 * relsync or a new key reconciles every primary once.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CopyPolicy } from '../config/copy-policy.js';
import type { ContentHasher } from './content-hasher.js';
import type { ResolvedResource } from './resolved-config.js';

export class ConfigFingerprint {
  /** Each resource's serialized config, built once (the resources live as long as the process's config). */
  private readonly serialized = new WeakMap<ResolvedResource, string>();

  /**
   * `pins`: a digest of where copy namespaces are pinned, which may change within a term (read at
   * each call, so it must be cheap).
   */
  constructor(
    private readonly hasher: ContentHasher,
    private readonly shared: { readonly agentName: string; readonly policy: CopyPolicy; readonly limits: unknown },
    private readonly pins: () => string = () => '',
  ) {}

  /** Keyed like content hashes: a new key (made again after it was lost) changes every fingerprint. */
  of(resource: ResolvedResource): string {
    let text = this.serialized.get(resource);
    if (text === undefined) {
      const { policy, ...rest } = this.shared;
      // The policy's functions do not show what they were compiled from; its source does.
      text = fingerprintJson({ code: codeDigest, ...rest, policy: policy.source, resource });
      this.serialized.set(resource, text);
    }
    return this.hasher.hashSerialized(`${text}\u0000${this.pins()}`);
  }
}

/**
 * JSON with sorted keys in which what JSON.stringify drops still counts: a RegExp by its pattern
 * and flags, undefined as null. A function is refused: what it closes over (a compiled copy
 * policy's lists, say) would not show, and a config change would not change the fingerprint.
 */
export function fingerprintJson(value: unknown): string {
  if (value instanceof RegExp) return JSON.stringify(`/${value.source}/${value.flags}`);
  if (typeof value === 'function') throw new Error(`a config fingerprint cannot include a function (${value.name || 'anonymous'}): fingerprint what it was made from`);
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(fingerprintJson).join(',')}]`;
  if (value instanceof Set || value instanceof Map) return fingerprintJson([...value]);
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${fingerprintJson(v)}`).join(',')}}`;
}

/**
 * A digest of relsync's compiled code (every .js file under dist/src, also in the container image),
 * of the installed versions of its dependencies and of Node.js: a fix in how a copy is made (here
 * or in a library) reaches every copy at the next sweep, version bump or not. A few milliseconds,
 * once per process.
 */
const codeDigest = ((): string => {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const hash = createHash('sha256').update(process.version).update('\u0000');
  const packageRoot = fileURLToPath(new URL('../../../', import.meta.url));
  const readJson = (path: string): { version?: string; dependencies?: Record<string, string> } | undefined => {
    try {
      return JSON.parse(readFileSync(path, 'utf8')) as { version?: string; dependencies?: Record<string, string> };
    } catch {
      return undefined;
    }
  };
  for (const name of Object.keys(readJson(join(packageRoot, 'package.json'))?.dependencies ?? {}).sort()) {
    hash.update(`${name}@${readJson(join(packageRoot, 'node_modules', name, 'package.json'))?.version ?? '?'}\u0000`);
  }
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.js')) hash.update(path.slice(root.length)).update('\u0000').update(readFileSync(path)).update('\u0000');
    }
  };
  walk(root);
  return hash.digest('hex');
})();

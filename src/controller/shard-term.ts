/**
 * The work of one shard this replica holds: a store of its own, a wiring of
 * the shard's platform clusters (on kcp: of its logical clusters), and a term
 * (leader-term.ts) until the coordinator stops it. Every write of the term
 * asks the shard's fence first (Connection.setWriteFence): none leaves once
 * the shard's Lease is not provably held. The store goes with the shard: a
 * replica that gets it again (or another) builds it afresh from the API
 * servers, listing, then watching, then sweeping. What it cannot reach (a
 * tenant's API server down, discovery failing, a type not served there) it
 * retries, held and not ready, for as long as it holds the shard: one
 * tenant's cluster never stops the replica.
 */
import { existsSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import type { Logger } from 'pino';
import type { ShardMap } from '../config/shard-map.js';
import { openStore, type OpenedStore } from '../store/database.js';
import { ResolveError } from '../sync/resolved-config.js';
import { Backoff } from '../util/backoff.js';
import { sleep } from '../util/sleep.js';
import { TermStatus } from './health.js';
import { lead, type TermOptions } from './leader-term.js';
import { wire, type Wiring, type WiringOptions } from './wiring.js';

/** Where shard `shard`'s store is: beside the replica's store, named by the map, so that another map's is never read. */
export function shardStorePath(storePath: string, map: ShardMap, shard: number): string {
  const ext = extname(storePath);
  return join(dirname(storePath), `${basename(storePath, ext)}.shard-${shard}-of-${map.shards}.${map.fingerprint}${ext}`);
}

/** Which shards a replica holds, written beside its store for `relsync inspect shards` (read by no one else). */
export interface ShardStatusFile {
  readonly identity: string;
  readonly shards: number;
  readonly fingerprint: string;
  readonly at: string;
  readonly held: ReadonlyArray<{ readonly shard: number; readonly phase: string; readonly since: string; readonly clusters: readonly string[]; readonly store: string }>;
}

export function shardStatusPath(storePath: string): string {
  return `${storePath}.shards.json`;
}

/** Written whole (a rename), so that a reader never sees half of it. */
export function writeShardStatus(storePath: string, status: ShardStatusFile): void {
  const path = shardStatusPath(storePath);
  writeFileSync(`${path}.tmp`, `${JSON.stringify(status, null, 2)}\n`, { mode: 0o600 });
  renameSync(`${path}.tmp`, path);
}

/** Removes a shard store and its WAL. */
export function dropShardStore(path: string): void {
  for (const p of [path, `${path}-wal`, `${path}-shm`]) rmSync(p, { force: true });
}

/** Every shard store beside the replica's store (and its WAL), whichever map it was of: a process starts without any. */
export function dropShardStores(storePath: string): string[] {
  const dir = dirname(storePath);
  const stem = `${basename(storePath, extname(storePath))}.shard-`;
  if (!existsSync(dir)) return [];
  const dropped: string[] = [];
  for (const name of readdirSync(dir)) {
    if (!name.startsWith(stem)) continue;
    rmSync(join(dir, name), { force: true });
    dropped.push(name);
  }
  return dropped;
}

export interface ShardTermView {
  readonly status: TermStatus;
  readonly wiring: Wiring;
  readonly store: OpenedStore;
}

export interface ShardTermOptions {
  readonly shard: number;
  readonly map: ShardMap;
  readonly wiring: Omit<WiringOptions, 'store' | 'shard'>;
  readonly term: Omit<TermOptions, 'status'>;
  /** The shard's: every line of its work names it. */
  readonly logger: Logger;
  /** Why writes may not leave now (the shard's Lease, shard-coordinator.ts); undefined: they may. */
  readonly fence: () => string | undefined;
  /** The term's status, wiring and store, for the probes, metrics and /explain, as they come (and go: undefined). */
  readonly onStatus: (term: ShardTermView | undefined) => void;
  /** Why the shard is not wired up yet, each time a try failed (for /readyz). */
  readonly onWiring: (problem: string) => void;
}

/** Runs the shard's work until `signal` aborts; drops its store after. */
export async function runShardTerm(options: ShardTermOptions, signal: AbortSignal): Promise<void> {
  const { shard, map, logger } = options;
  const config = options.wiring.config;
  const platforms = map.platformsOf(shard, config.platformClusters);
  if (platforms.length === 0) {
    // More shards than clusters: held, so that balance counts it, with nothing to do.
    logger.info({ shard }, 'this shard has no platform cluster; nothing to reconcile');
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    return;
  }
  const path = shardStorePath(config.storePath, map, shard);
  const store = await openStore(path);
  let w: Wiring | undefined;
  try {
    // The replica's cache budgets are shared out: one that holds every shard uses what one without shards would.
    const cache = { bytes: Math.floor(config.cache.bytes / map.shards), indexBytes: Math.floor(config.cache.indexBytes / map.shards) };
    // Every line of the shard's work names the shard.
    const shardWiring: WiringOptions = { ...options.wiring, logger, config: { ...config, cache }, store, shard: { platforms, ownsLogical: (name) => map.shardOf(name) === shard } };
    // Wired and led again when kcp's shards change (lead() ends by itself then), until the shard is given up.
    while (!signal.aborted) {
      const backoff = new Backoff({ initialMs: 500, maxMs: 60_000 });
      while (!w && !signal.aborted) {
        try {
          w = await wire(shardWiring, signal);
        } catch (err) {
          if (signal.aborted) break;
          const retryInMs = backoff.next();
          const message = (err as Error).message;
          options.onWiring(err instanceof ResolveError ? `a configured type: ${message}` : message);
          logger[err instanceof ResolveError ? 'error' : 'warn']({ shard, err: message, retryInMs }, 'could not wire up the shard; will retry');
          await sleep(retryInMs, signal);
        }
      }
      // Wired, but given up meanwhile: nothing to lead.
      if (!w || signal.aborted) return;
      const fence = options.fence;
      // Events go through clients the fence lets through (wiring.ts).
      w.clusters.setWriteFence(() => fence());
      const status = new TermStatus(() => store.sqlite.open, () => true);
      options.onStatus({ status, wiring: w, store });
      logger.info({ shard, clusters: w.clusters.platforms.map((p) => p.name) }, 'working for the shard');
      const why = await lead(w, { ...options.term, logger, status, shard }, signal);
      if (why === undefined) break;
      options.onStatus(undefined);
      await w.recorder.idle(2000);
      w.clusters.close();
      w = undefined;
    }
  } finally {
    options.onStatus(undefined);
    if (w) {
      await w.recorder.idle(2000);
      w.clusters.close();
    }
    await store.close();
    dropShardStore(path);
  }
}

/**
 * The work of one shard this replica holds: a store of its own, a wiring of
 * the shard's platform clusters (on kcp: of its logical clusters), and a term
 * (leader-term.ts) until the coordinator stops it. Every write of the term
 * asks the shard's fence first (Connection.setWriteFence): none leaves once
 * the shard's Lease is not provably held. The store stays beside the
 * replica's when the shard ends: a replica that takes the shard again resumes
 * from it (its watches from their checkpoints) when the Lease's history proves
 * no one else held the shard since (shardStoreFor); otherwise the store is
 * built afresh from the API servers, listing, then watching, then sweeping.
 * (An older store would be safe too: claim-knowledge.ts; a current one only
 * saves the relist.) What it cannot reach (a
 * tenant's API server down, discovery failing, a type not served there) it
 * retries, held and not ready, for as long as it holds the shard: one
 * tenant's cluster never stops the replica.
 */
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import type { Logger } from 'pino';
import type { ShardMap } from '../config/shard-map.js';
import { openStore, type OpenedStore } from '../store/database.js';
import { ResolveError } from '../sync/resolved-config.js';
import { Backoff } from '../util/backoff.js';
import { TermStatus } from './health.js';
import { lead, type TermOptions } from './leader-term.js';
import type { ShardTake } from './shard-coordinator.js';
import { wire, type Wiring, type WiringOptions } from './wiring.js';
import { aborted } from '../util/on-abort.js';

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

/** Removes a shard store, its WAL and its record of the holding it belongs to. */
export function dropShardStore(path: string): void {
  for (const p of [path, `${path}-wal`, `${path}-shm`, holdingPath(path)]) rmSync(p, { force: true });
}

/** Every shard store beside the replica's store (and its WAL) of another shard map than `map`: they can never be resumed. */
export function dropShardStores(storePath: string, map: ShardMap): string[] {
  const dir = dirname(storePath);
  const stem = `${basename(storePath, extname(storePath))}.shard-`;
  const ours = new Set(Array.from({ length: map.shards }, (_, k) => basename(shardStorePath(storePath, map, k))));
  if (!existsSync(dir)) return [];
  const dropped: string[] = [];
  for (const name of readdirSync(dir)) {
    if (!name.startsWith(stem) || [...ours].some((o) => name === o || name.startsWith(`${o}-`) || name.startsWith(`${o}.`))) continue;
    rmSync(join(dir, name), { force: true });
    dropped.push(name);
  }
  return dropped;
}

/** Which holding a shard store belongs to: this replica's identity and the Lease history of its take. */
interface HoldingRecord {
  readonly identity: string;
  readonly leaseUid: string;
  /** The Lease's leaseTransitions once this replica took it. */
  readonly transitions: number;
}

function holdingPath(path: string): string {
  return `${path}.holding.json`;
}

/**
 * Whether the shard store at `path` may be resumed for this take, else it is dropped; then it is
 * recorded as this take's. It may when it is this replica's (identity: store/replica-lock.ts keeps
 * it only on the same machine boot) and no replica took the Lease since this one last did: the
 * same Lease (uid), with as many transitions before this take as after its last one. A shard
 * taken back after a crash, or after a clean stop that released it with no one taking it
 * meanwhile, resumes; one another replica held since is built afresh.
 */
export function shardStoreFor(path: string, identity: string, taken: ShardTake): 'resumed' | 'fresh' {
  let resumed = false;
  try {
    const record = JSON.parse(readFileSync(holdingPath(path), 'utf8')) as HoldingRecord;
    resumed = existsSync(path) && record.identity === identity && record.leaseUid === taken.leaseUid && record.transitions === taken.transitionsBefore;
  } catch {
    // No record (a new shard store, or one from before records): fresh.
  }
  if (!resumed) dropShardStore(path);
  const record: HoldingRecord = { identity, leaseUid: taken.leaseUid, transitions: taken.transitionsAfter };
  writeFileSync(`${holdingPath(path)}.tmp`, JSON.stringify(record), { mode: 0o600 });
  renameSync(`${holdingPath(path)}.tmp`, holdingPath(path));
  return resumed ? 'resumed' : 'fresh';
}

export interface ShardTermView {
  readonly status: TermStatus;
  readonly wiring: Wiring;
  readonly store: OpenedStore;
}

export interface ShardTermOptions {
  readonly shard: number;
  /** This replica's identity, and the Lease history of the take: whether the shard's store may be resumed. */
  readonly identity: string;
  readonly taken: ShardTake;
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

/** Runs the shard's work until `signal` aborts; its store stays for a later take to resume (shardStoreFor). */
export async function runShardTerm(options: ShardTermOptions, signal: AbortSignal): Promise<void> {
  const { shard, map, logger } = options;
  const config = options.wiring.config;
  const platforms = map.platformsOf(shard, config.platformClusters);
  if (platforms.length === 0) {
    // More shards than clusters: held, so that balance counts it, with nothing to do.
    logger.info({ shard }, 'this shard has no platform cluster; nothing to reconcile');
    await aborted(signal);
    return;
  }
  const path = shardStorePath(config.storePath, map, shard);
  const origin = shardStoreFor(path, options.identity, options.taken);
  logger.info({ shard, store: path }, origin === 'resumed' ? 'sharding: resumes the shard\'s store (no other replica held the shard since this one)' : 'sharding: builds the shard\'s store afresh');
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
          await options.wiring.clock.sleep(retryInMs, signal);
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
  }
}

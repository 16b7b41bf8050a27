import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigError } from '../config/config-problem.js';
import { explainQuery } from '../controller/explain.js';
import { loadConfig } from '../config/load-config.js';
import { openStore } from '../store/database.js';
import { logicalClustersWithPrimaries, primariesMatching, relationsOfObject, relationsOfPrimary, selectorsOfPrimary, type ObjectQuery } from '../store/inspect-queries.js';
import type { PrimariesTable, RelationsTable } from '../store/schema.js';
import { printable } from './printable.js';
import { printTable } from './table.js';
import { shardStatusPath, type ShardStatusFile } from '../controller/shard-term.js';

export interface InspectOptions {
  readonly cluster?: string;
  readonly config?: string;
  readonly store?: string;
  readonly output: 'table' | 'json';
}

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

function storePath(options: InspectOptions): string {
  if (options.store) return resolve(options.store);
  if (options.config) {
    try {
      return loadConfig(options.config).storePath;
    } catch (err) {
      if (err instanceof ConfigError) fail(err.message);
      throw err;
    }
  }
  return resolve('relsync.db');
}

/** `secrets` → core secrets; `databases.demo.relsync.dev` → group demo.relsync.dev (explainQuery reads both commands' arguments). */
function parseQuery(type: string, object: string, cluster: string | undefined): ObjectQuery {
  const query = explainQuery(type, object, cluster);
  if (typeof query === 'string') fail(query);
  return query;
}

/** Which shards the replica of this store holds (sharding.shards > 1), as it last wrote; undefined without sharding. */
function shardStatus(path: string): ShardStatusFile | undefined {
  const file = shardStatusPath(path);
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as ShardStatusFile;
  } catch (err) {
    fail(`${file}: ${(err as Error).message}`);
  }
}

/** Runs `fn` on the store, and on each store of a shard the replica holds; the answers together. */
async function withStores<T>(options: InspectOptions, fn: (db: Awaited<ReturnType<typeof openStore>>['db']) => Promise<T[]>): Promise<T[]> {
  const path = storePath(options);
  if (!existsSync(path)) fail(`store ${path} does not exist (give --store or --config)`);
  // With shards, the replica's own store is not worked with (only `relsync sweep` uses it): the held shards' are the current ones.
  const status = shardStatus(path);
  const paths = status ? status.held.map((h) => h.store).filter((p) => existsSync(p)) : [path];
  const out: T[] = [];
  for (const p of paths) {
    const store = await openStore(p, { readonly: true });
    try {
      out.push(...(await fn(store.db)));
    } finally {
      await store.close();
    }
  }
  return out;
}

/** `relsync inspect shards`: which shards the replica of this store holds, and the clusters of each. */
export function inspectShards(options: InspectOptions): void {
  const path = storePath(options);
  const status = shardStatus(path);
  if (!status) {
    console.log(`${path}: no shards (sharding.shards is 1, or this replica has not started with shards)`);
    return;
  }
  if (options.output === 'json') {
    console.log(JSON.stringify(status, null, 2));
    return;
  }
  console.log(`replica ${status.identity}: ${status.held.length} of ${status.shards} shards (shard map ${status.fingerprint}, as of ${status.at})`);
  if (status.held.length > 0) printTable(status.held.map((h) => ({ shard: String(h.shard), phase: h.phase, since: h.since, clusters: h.clusters.length > 0 ? h.clusters.join(', ') : '(kcp workspaces by hash; see inspect workspaces)' })), ['shard', 'phase', 'since', 'clusters']);
}

const relationColumns = (r: RelationsTable) => ({
  primary: `${r.primary_cluster}:${typeOf(r.primary_group, r.primary_resource)}:${r.primary_namespace}/${r.primary_name}`,
  rule: r.rule_id,
  origin: r.origin,
  source: `${r.source_cluster}:${typeOf(r.source_group, r.source_resource)}:${r.source_namespace}/${r.source_name}`,
  destination: `${r.dest_cluster}:${typeOf(r.dest_group, r.dest_resource)}:${r.dest_namespace}/${r.dest_name}`,
  state: r.state,
  lastSynced: r.last_synced_at ?? '-',
  message: r.message ?? '',
});

/** Where a primary's copy is; its type too when it is not the primary's (copyAs). */
function copyOf(p: PrimariesTable): string {
  const type = p.copy_group === p.group && p.copy_resource === p.resource ? '' : `${typeOf(p.copy_group, p.copy_resource)}:`;
  return `${p.copy_cluster}:${type}${p.copy_namespace}/${p.copy_name}`;
}

function typeOf(group: string, resource: string): string {
  return group ? `${resource}.${group}` : resource;
}

export async function inspectOwners(type: string, object: string, options: InspectOptions): Promise<void> {
  const query = parseQuery(type, object, options.cluster);
  const rows = await withStores(options, (db) => relationsOfObject(db, query));
  const out = rows.map(relationColumns);
  if (options.output === 'json') console.log(JSON.stringify(out, null, 2));
  else if (out.length === 0) console.log(`no primary owns ${type} ${object}`);
  else printTable(out, ['primary', 'rule', 'origin', 'source', 'destination', 'state', 'lastSynced']);
}

export async function inspectPrimary(type: string, object: string, options: InspectOptions): Promise<void> {
  const query = parseQuery(type, object, options.cluster);
  const result = await withStores(options, async (db) => {
    const primaries = await primariesMatching(db, query);
    return Promise.all(primaries.map(async (p) => ({ primary: p, relations: await relationsOfPrimary(db, p), selectors: await selectorsOfPrimary(db, p) })));
  });
  if (options.output === 'json') {
    console.log(
      JSON.stringify(
        result.map(({ primary: p, relations, selectors }) => ({
          cluster: p.cluster,
          primary: `${p.namespace}/${p.name}`,
          uid: p.uid,
          copy: copyOf(p),
          state: p.state,
          message: p.message,
          lastSynced: p.last_synced_at,
          relations: relations.map(relationColumns),
          selectors,
        })),
        null,
        2,
      ),
    );
    return;
  }
  if (result.length === 0) {
    console.log(`the store knows no primary ${type} ${object}`);
    return;
  }
  for (const { primary: p, relations, selectors } of result) {
    console.log(`${p.cluster}:${typeOf(p.group, p.resource)}:${p.namespace}/${p.name}  copy ${copyOf(p)}  state ${p.state}  last synced ${p.last_synced_at ?? '-'}`);
    if (p.message) console.log(`  ${printable(p.message)}`);
    if (relations.length === 0) console.log('  no related objects');
    else printTable(relations.map(relationColumns), ['rule', 'origin', 'source', 'destination', 'state', 'lastSynced']);
    for (const s of selectors) console.log(`  selector of rule ${s.rule}: ${s.selector} in ${s.scope}`);
  }
}

/** kcp: the workspaces relsync knows, with their primaries. */
export async function inspectWorkspaces(options: InspectOptions): Promise<void> {
  const rows = await withStores(options, (db) => logicalClustersWithPrimaries(db));
  if (options.output === 'json') console.log(JSON.stringify(rows, null, 2));
  else if (rows.length === 0) console.log('the store knows no kcp workspace');
  else printTable(rows.map((r) => ({ workspace: r.name, platform: r.platform, state: r.state, primaries: String(r.primaries), firstSeen: r.firstSeenAt })), ['workspace', 'platform', 'state', 'primaries', 'firstSeen']);
}

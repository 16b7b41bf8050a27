/**
 * Who held which shard when, from relsync's own logs, and who wrote what,
 * from the service cluster's audit log: for the end-to-end test of sharding
 * and the chaos run with replicas. Each replica talks to the service cluster
 * as a user of its own (`relsync-<replica>`), so that the audit log tells
 * replicas apart.
 */
import { readFileSync } from 'node:fs';

export interface Holding {
  readonly replica: string;
  readonly shard: number;
  readonly from: number;
  readonly to: number;
}

interface LogLine {
  readonly time: string | number;
  readonly msg: string;
  readonly shard?: number;
}

interface AuditEvent {
  readonly verb: string;
  readonly user: { readonly username: string };
  readonly objectRef?: { readonly resource?: string; readonly namespace?: string; readonly name?: string; readonly apiGroup?: string };
  readonly requestReceivedTimestamp: string;
}

const ENDS = ['sharding: released a shard', 'sharding: lost a shard: no more writes for it; its work stops'];

/**
 * Each replica's holdings, from its log files (one per run) and when each run was killed: from
 * "took a shard" to "released a shard", "lost a shard", a failed release, or the kill.
 */
export function holdingsFromLogs(logs: Readonly<Record<string, readonly string[]>>, killedAt: Readonly<Record<string, readonly number[]>>): Holding[] {
  const holdings: Holding[] = [];
  for (const [replica, files] of Object.entries(logs)) {
    files.forEach((file, run) => {
      const end = killedAt[replica]?.[run] ?? Infinity;
      const open = new Map<number, number>();
      for (const raw of readFileSync(file, 'utf8').split('\n')) {
        if (!raw.startsWith('{')) continue;
        const l = JSON.parse(raw) as LogLine;
        if (l.shard === undefined) continue;
        const time = typeof l.time === 'number' ? l.time : Date.parse(l.time);
        if (l.msg === 'sharding: took a shard') open.set(l.shard, time);
        if ((ENDS.includes(l.msg) || l.msg.startsWith('sharding: could not release')) && open.has(l.shard)) {
          holdings.push({ replica, shard: l.shard, from: open.get(l.shard)!, to: time });
          open.delete(l.shard);
        }
      }
      for (const [shard, from] of open) holdings.push({ replica, shard, from, to: end });
    });
  }
  return holdings;
}

/**
 * Every create, update, patch and delete of a replica in the service cluster that touched a copy
 * namespace (the namespace or an object in it), checked against the holdings: the writer held the
 * namespace's shard then, and of the holdings that overlap then (one not yet noticed lost), it
 * took the shard last. Leases are left out (they are how shards are held).
 */
export function writesOutsideHoldings(auditLogPath: string, holdings: readonly Holding[], shardOfNamespace: (namespace: string) => number | undefined, replicaOf: (username: string) => string | undefined): { checked: number; problems: string[] } {
  const problems: string[] = [];
  let checked = 0;
  for (const line of readFileSync(auditLogPath, 'utf8').split('\n')) {
    if (!line) continue;
    const e = JSON.parse(line) as AuditEvent;
    const replica = replicaOf(e.user.username);
    if (!replica || !['create', 'update', 'patch', 'delete'].includes(e.verb) || e.objectRef?.apiGroup === 'coordination.k8s.io') continue;
    const ref = e.objectRef ?? {};
    const shard = shardOfNamespace(ref.namespace ?? '') ?? (ref.resource === 'namespaces' ? shardOfNamespace(ref.name ?? '') : undefined);
    if (shard === undefined) continue;
    const at = Date.parse(e.requestReceivedTimestamp);
    const what = `${replica} wrote ${e.verb} ${ref.resource} ${ref.namespace ?? ''}/${ref.name ?? ''} at ${e.requestReceivedTimestamp} for shard ${shard}`;
    const overlapping = holdings.filter((h) => h.shard === shard && h.from <= at && at <= h.to).sort((a, b) => b.from - a.from);
    if (!overlapping.some((h) => h.replica === replica)) problems.push(`${what}, which it did not hold then`);
    else if (overlapping[0]!.replica !== replica) problems.push(`${what}, which ${overlapping[0]!.replica} held then`);
    checked++;
  }
  return { checked, problems };
}

/** The shards a replica works for, from its /readyz (`ok: holds shards 1, 4 of 6`); undefined while not ready or while it stops some. */
export async function shardsHeld(httpPort: number): Promise<number[] | undefined> {
  const res = await fetch(`http://127.0.0.1:${httpPort}/readyz`);
  const text = await res.text();
  if (res.status !== 200 || text.includes('stopping')) return undefined;
  const m = /holds (?:no shard|shards? ([\d, ]+)) of \d+/.exec(text);
  if (!m) throw new Error(`/readyz does not say which shards: ${text}`);
  return m[1] ? m[1].split(', ').map(Number) : [];
}

// Replicas sharing shards, on a fake clock and an in-memory Lease API with
// resourceVersions and conflicts (the real ShardLeases over it): they settle
// to a balanced share; at no moment may two replicas write for one shard
// (their fences are checked at every step); a replica whose API server hangs
// shuts its fence before another can take its shards; a shard given up is
// released only after its work stopped; and no shard is taken while a replica
// of another shard map is alive.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../src/core/object.js';
import { ApiError } from '../../../src/kube/api-error.js';
import { ShardCoordinator } from '../../../src/controller/shard-coordinator.js';
import { ShardLeases, type ShardLeaseClient } from '../../../src/controller/shard-leases.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const logger = pino({ level: 'silent' });
const SHARDS = 6;

/** The Leases of one namespace, as an API server keeps them. */
class LeaseApi {
  readonly leases = new Map<string, KubeObject>();
  private version = 0;

  store(object: KubeObject): KubeObject {
    const stored = structuredClone({ ...object, metadata: { ...object.metadata, resourceVersion: String(++this.version), uid: object.metadata.uid ?? `uid-${this.version}` } });
    this.leases.set(stored.metadata.name!, stored);
    return structuredClone(stored);
  }
}

/** One replica's client of the LeaseApi; `mode` hang: nothing it sends is answered (a paused network). */
class Client implements ShardLeaseClient {
  mode: 'up' | 'hang' = 'up';
  /** Requests for these Leases are never answered (one hanging request among others). */
  readonly hangs = new Set<string>();
  constructor(private readonly api: LeaseApi) {}

  async get(_ns: string, name: string) {
    await this.answer();
    const l = this.api.leases.get(name);
    return l && structuredClone(l);
  }
  async listAll(options: { labelSelector?: string } = {}) {
    await this.answer();
    const [k, v] = (options.labelSelector ?? '=').split('=');
    return { items: [...this.api.leases.values()].filter((l) => !k || l.metadata.labels?.[k] === v).map((l) => structuredClone(l)), resourceVersion: '' };
  }
  async create(_ns: string, object: KubeObject) {
    await this.answer();
    if (this.api.leases.has(object.metadata.name!)) throw new ApiError('POST', 'leases', 409, JSON.stringify({ kind: 'Status', reason: 'AlreadyExists' }));
    return this.api.store(object);
  }
  async replace(object: KubeObject) {
    await this.answer();
    if (this.hangs.has(object.metadata.name!)) await new Promise<void>(() => undefined);
    const current = this.api.leases.get(object.metadata.name!);
    if (!current) throw new ApiError('PUT', 'leases', 404, JSON.stringify({ kind: 'Status', reason: 'NotFound' }));
    if (current.metadata.resourceVersion !== object.metadata.resourceVersion) throw new ApiError('PUT', 'leases', 409, JSON.stringify({ kind: 'Status', reason: 'Conflict' }));
    return this.api.store(object);
  }
  private answer(): Promise<void> {
    return this.mode === 'hang' ? new Promise<void>(() => undefined) : Promise.resolve();
  }
}

interface Replica {
  readonly name: string;
  readonly client: Client;
  readonly coordinator: ShardCoordinator;
  /** Shards whose work runs, with their fences. */
  readonly working: Map<number, () => string | undefined>;
  readonly stop: AbortController;
  readonly done: Promise<void>;
}

function replica(api: LeaseApi, clock: FakeClock, name: string, options: { fingerprint?: string; stopMs?: number; client?: Client } = {}): Replica {
  const client = options.client ?? new Client(api);
  const working = new Map<number, () => string | undefined>();
  const leases = new ShardLeases({ client, namespace: 'relsync', base: 'relsync-e2e', identity: name, fingerprint: options.fingerprint ?? 'map-1', leaseDurationMs: 15_000, clock });
  const coordinator = new ShardCoordinator({
    leases,
    map: { shards: SHARDS, fingerprint: options.fingerprint ?? 'map-1' },
    identity: name,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000,
    logger,
    clock,
    work: async (shard, signal, fence) => {
      working.set(shard, fence);
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      // In-flight work that takes a while to end.
      if (options.stopMs) await clock.sleep(options.stopMs, new AbortController().signal);
      working.delete(shard);
    },
  });
  const stop = new AbortController();
  return { name, client, coordinator, working, stop, done: coordinator.start(stop.signal) };
}

/** Moves the clock a step at a time; after each step, no shard may have two replicas whose fences are open. */
async function run(clock: FakeClock, replicas: readonly Replica[], ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 250) {
    await clock.advance(250);
    for (let shard = 0; shard < SHARDS; shard++) {
      const open = replicas.filter((r) => r.working.has(shard) && r.working.get(shard)!() === undefined).map((r) => r.name);
      assert.ok(open.length <= 1, `at ${clock.now()} ms, shard ${shard} may be written by ${open.join(' and ')}`);
    }
  }
}

const shares = (replicas: readonly Replica[]) => replicas.map((r) => r.coordinator.held().filter((h) => h.phase === 'working').length);

describe('shard coordinator on a fake clock', () => {
  it('settles three replicas to two shards each, every shard worked once', async () => {
    const clock = new FakeClock();
    const api = new LeaseApi();
    const replicas = ['a', 'b', 'c'].map((n) => replica(api, clock, n));
    await run(clock, replicas, 20_000);
    assert.deepEqual(shares(replicas), [2, 2, 2]);
    assert.deepEqual(replicas.flatMap((r) => [...r.working.keys()]).sort(), [0, 1, 2, 3, 4, 5]);
    for (const r of replicas) r.stop.abort();
    await run(clock, replicas, 5_000);
    await Promise.all(replicas.map((r) => r.done));
    assert.ok([...api.leases.values()].every((l) => !(l.spec as { holderIdentity?: string }).holderIdentity), 'member slots released on stop too');
  });

  it('shuts the fence of a replica cut off from the API server before another takes its shards', async () => {
    const clock = new FakeClock();
    const api = new LeaseApi();
    // Its in-flight work goes on for a minute after it is told to stop: only the fence keeps it from writing.
    const replicas = ['a', 'b', 'c'].map((n) => replica(api, clock, n, n === 'c' ? { stopMs: 60_000 } : {}));
    await run(clock, replicas, 20_000);
    const cut = replicas[2]!;
    const itsShards = [...cut.working.keys()];
    cut.client.mode = 'hang';
    const at = clock.now();
    // run() checks at every step that its fence shut before anyone else worked for its shards.
    const takenAfter = new Map<number, number>();
    for (let t = 0; t < 30_000; t += 250) {
      await run(clock, replicas, 250);
      for (const shard of itsShards) if (!takenAfter.has(shard) && replicas.slice(0, 2).some((r) => r.working.has(shard))) takenAfter.set(shard, clock.now() - at);
    }
    assert.deepEqual(shares(replicas.slice(0, 2)), [3, 3], 'the others took its shards');
    for (const shard of itsShards) {
      assert.ok(cut.working.has(shard), `shard ${shard}: its work has not ended yet`);
      assert.ok(cut.working.get(shard)!() !== undefined, `shard ${shard}: the cut-off replica may not write`);
    }
    const delays = [...takenAfter.values()];
    assert.equal(delays.length, itsShards.length);
    assert.ok(delays.every((ms) => ms >= 15_000 && ms <= 15_000 + 2 * 2_000 + 250), `taken after a lease duration and at most two retry periods: ${delays.join(', ')} ms`);
  });

  it('takes back at once the shards that still name it: after an outage of its own, and as a process restarted with its identity', async () => {
    const clock = new FakeClock();
    const api = new LeaseApi();
    const client = new Client(api);
    const alone = replica(api, clock, 'a', { client });
    await run(clock, [alone], 6_000);
    assert.deepEqual(shares([alone]), [6]);
    client.mode = 'hang';
    await run(clock, [alone], 15_000);
    assert.deepEqual(shares([alone]), [0], 'lost every shard while the service cluster did not answer');
    client.mode = 'up';
    // Requests sent while it hung time out first (the renew deadline); then it takes its own shards back, no one else being there.
    await run(clock, [alone], 14_000);
    assert.deepEqual(shares([alone]), [6], 'its own shards again');
    // Killed (its Leases still name it, renewed a moment ago) and started again with the same identity.
    alone.stop.abort();
    const restarted = replica(api, clock, 'a');
    await run(clock, [restarted], 6_000);
    assert.deepEqual(shares([restarted]), [6]);
    restarted.stop.abort();
    await run(clock, [alone, restarted], 5_000);
  });

  it('keeps the other shards\' fences open while one shard\'s Lease request hangs', async () => {
    const clock = new FakeClock();
    const api = new LeaseApi();
    const client = new Client(api);
    const one = replica(api, clock, 'a', { client });
    await run(clock, [one], 6_000);
    client.hangs.add('relsync-e2e-shard-0');
    for (let t = 0; t < 30_000; t += 250) {
      await clock.advance(250);
      for (const shard of [1, 2, 3, 4, 5]) assert.equal(one.working.get(shard)?.(), undefined, `shard ${shard}'s fence at ${clock.now()} ms`);
    }
    assert.notEqual(one.working.get(0)?.() ?? 'stopped', undefined, 'shard 0, whose Lease hangs, may not write');
    client.hangs.clear();
    one.stop.abort();
    await run(clock, [one], 15_000);
  });

  it('takes no shard while a replica without shards holds the leader Lease (a rollout from one replica to shards)', async () => {
    const clock = new FakeClock();
    const api = new LeaseApi();
    const renewLeader = () => api.store({ ...(api.leases.get('relsync-e2e') ?? { metadata: { name: 'relsync-e2e', namespace: 'relsync' } }), spec: { holderIdentity: 'old-leader', leaseDurationSeconds: 15, renewTime: new Date(clock.now()).toISOString() } });
    renewLeader();
    const sharded = replica(api, clock, 'new');
    for (let t = 0; t < 20_000; t += 2_000) {
      await run(clock, [sharded], 2_000);
      renewLeader();
    }
    assert.deepEqual(shares([sharded]), [0], 'the live leader works for every cluster');
    assert.match(sharded.coordinator.waiting ?? '', /leader Lease/);
    // The old leader stops (its Lease released): the sharded replica takes everything.
    api.store({ ...api.leases.get('relsync-e2e')!, spec: { holderIdentity: '' } });
    await run(clock, [sharded], 6_000);
    assert.deepEqual(shares([sharded]), [6]);
    sharded.stop.abort();
    await run(clock, [sharded], 5_000);
  });

  it('gives up the shards it holds when a replica without shards leads (it may not have seen them: a rollback)', async () => {
    const clock = new FakeClock();
    const api = new LeaseApi();
    const sharded = replica(api, clock, 'new');
    await run(clock, [sharded], 6_000);
    assert.deepEqual(shares([sharded]), [6]);
    const renewLeader = () => api.store({ ...(api.leases.get('relsync-e2e') ?? { metadata: { name: 'relsync-e2e', namespace: 'relsync' } }), spec: { holderIdentity: 'old-leader', leaseDurationSeconds: 15, renewTime: new Date(clock.now()).toISOString() } });
    for (let t = 0; t < 20_000; t += 2_000) {
      renewLeader();
      await run(clock, [sharded], 2_000);
    }
    assert.deepEqual(shares([sharded]), [0], 'every shard given up to the leader');
    assert.equal([...api.leases.values()].filter((l) => l.metadata.name?.includes('-shard-') && (l.spec as { holderIdentity?: string }).holderIdentity === 'new').length, 0, 'and released');
    sharded.stop.abort();
    await run(clock, [sharded], 5_000);
  });

  it('releases a shard it gives up only after the shard\'s work stopped, and keeps renewing it meanwhile', async () => {
    const clock = new FakeClock();
    const api = new LeaseApi();
    const slow = replica(api, clock, 'a', { stopMs: 30_000 });
    await run(clock, [slow], 10_000);
    assert.deepEqual(shares([slow]), [6]);
    const other = replica(api, clock, 'b');
    const replicas = [slow, other];
    // 'a' gives three up; their work takes 30 s to stop, far past a lease duration: nobody may take them meanwhile.
    await run(clock, replicas, 25_000);
    assert.equal(slow.coordinator.held().filter((h) => h.phase === 'giving-up').length, 3);
    assert.equal(shares([other])[0], 0, 'the shards being given up are still held');
    await run(clock, replicas, 15_000);
    assert.deepEqual(shares(replicas), [3, 3]);
  });

  it('lets a replica beyond the number of shards stand by, and count in once a slot frees up', async () => {
    const clock = new FakeClock();
    const api = new LeaseApi();
    const replicas = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((n) => replica(api, clock, n));
    await run(clock, replicas, 30_000);
    const counts = shares(replicas);
    assert.equal(counts.reduce((x, y) => x + y, 0), SHARDS);
    assert.deepEqual([...counts].sort(), [0, 1, 1, 1, 1, 1, 1], `one stands by: ${counts.join(',')}`);
    const standby = replicas[counts.indexOf(0)]!;
    assert.match(standby.coordinator.waiting ?? '', /every member slot/);
    const leaving = replicas.find((r) => r !== standby)!;
    leaving.stop.abort();
    await run(clock, replicas, 20_000);
    await leaving.done;
    assert.equal(shares([standby])[0], 1, 'the replica that stood by took the freed shard');
  });

  it('takes no shard while a replica of another shard map is alive', async () => {
    const clock = new FakeClock();
    const api = new LeaseApi();
    const old = replica(api, clock, 'old', { fingerprint: 'map-old' });
    await run(clock, [old], 6_000);
    assert.deepEqual(shares([old]), [6]);
    const fresh = replica(api, clock, 'new', { fingerprint: 'map-new' });
    await run(clock, [old, fresh], 20_000);
    assert.deepEqual(shares([old, fresh]), [6, 0], 'the new map waits');
    assert.match(fresh.coordinator.waiting ?? '', /another shard map/);
    old.stop.abort();
    await run(clock, [old, fresh], 10_000);
    await old.done;
    assert.deepEqual(shares([fresh]), [6], 'once the old replica stopped, the new one takes everything');
    fresh.stop.abort();
    await run(clock, [fresh], 5_000);
    await settle();
  });
});

// Active-active replicas: three relsync processes over six platform clusters
// with `sharding.shards: 6`. Each holds two shards; a SIGKILLed replica's
// shards are taken within a lease duration and their clusters keep syncing;
// a replica that comes back gets its share again; a clean stop hands over at
// once. Each replica talks to the service cluster as a user of its own, so
// that the API server's audit log says who wrote what: no replica wrote a
// copy of a cluster whose shard it did not hold at that moment.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { acceptTokens, startControlPlane, startControlPlanes, type ControlPlane } from '../harness/control-plane.js';
import { eventually, installCrd } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { holdingsFromLogs, shardsHeld, writesOutsideHoldings } from '../harness/shard-holdings.js';
import { ClusterClient, defaultCopyNamespace } from '../harness/tenant.js';

const LEASE_SECONDS = 4;
const TENANTS = ['t1', 't2', 't3', 't4', 't5', 't6'] as const;
const REPLICAS = ['r1', 'r2', 'r3'] as const;
type Replica = (typeof REPLICAS)[number];

describe('sharding: three replicas over six platform clusters', () => {
  let service: ControlPlane;
  let tenants: ControlPlane[] = [];
  let dir: string;
  let svc: ClusterClient;
  const client: Partial<Record<(typeof TENANTS)[number], ClusterClient>> = {};
  const replicas: Partial<Record<Replica, RelsyncProcess>> = {};
  /** Every log file a replica wrote (restarts append a file), and when each process was killed. */
  const logs: Record<Replica, string[]> = { r1: [], r2: [], r3: [] };
  const killedAt: Partial<Record<Replica, number[]>> = {};
  const tokens: Record<string, string> = Object.fromEntries(REPLICAS.map((r) => [`relsync-${r}`, `token-${r}-${Math.random().toString(36).slice(2)}`]));

  const configFor = (r: Replica): string => {
    // The service kubeconfig of this replica: its own user, so that the audit log tells replicas apart.
    const kubeconfig = parse(readFileSync(service.kubeconfigPath, 'utf8')) as { users: Array<{ user: Record<string, string> }> };
    kubeconfig.users[0]!.user = { token: tokens[`relsync-${r}`]! };
    const path = join(dir, `service-${r}.yaml`);
    writeFileSync(path, JSON.stringify(kubeconfig));
    mkdirSync(join(dir, r), { recursive: true });
    return writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: tenants.map((t) => ({ name: t.name, kubeconfig: t.kubeconfigPath })),
      serviceCluster: { name: 'service', kubeconfig: path },
      // each replica has its own store, as each pod has its own volume
      store: { path: join(dir, r, 'relsync.db') },
      sharding: { shards: 6 },
      limits: { copyBytes: 2048 },
      leaderElection: { leaseDurationSeconds: LEASE_SECONDS, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [{ id: 'cfg', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }] }],
    }, `${r}.yaml`);
  };

  const start = async (r: Replica) => {
    const log = join(dir, `${r}-${logs[r].length + 1}.log`);
    logs[r].push(log);
    replicas[r] = await startRelsync(configFor(r), log);
  };

  /** The shards a replica says it works for (its /readyz), or undefined when it is not ready. */
  const heldBy = async (r: Replica): Promise<number[] | undefined> => {
    const p = replicas[r];
    if (!p || p.child.exitCode !== null) return [];
    return shardsHeld(p.httpPort);
  };

  /** Waits until the running replicas hold every shard exactly once, `each` apiece. */
  const spread = async (running: readonly Replica[], each: number, timeoutMs: number): Promise<Record<string, number[]>> =>
    eventually(`${running.join(', ')} hold ${each} shards each`, async () => {
      const held: Record<string, number[]> = {};
      for (const r of running) {
        const shards = await heldBy(r);
        if (!shards || shards.length !== each) return undefined;
        held[r] = shards;
      }
      const all = Object.values(held).flat().sort((a, b) => a - b);
      return all.length === 6 && all.every((s, i) => s === i) ? held : undefined;
    }, timeoutMs);

  /** A change on each tenant, and its arrival in the service cluster. */
  const changeEverywhere = async (value: string, timeoutMs: number) => {
    for (const t of TENANTS) await client[t]!.putConfigMap('shop', 'cfg', { v: value });
    for (const t of TENANTS) {
      await eventually(`${t}'s change ${value}`, async () => (await svc.configMap(defaultCopyNamespace(t, 'shop'), 'cfg'))?.data?.v === value || undefined, timeoutMs);
    }
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-sharding-'));
    [service, tenants] = await Promise.all([startControlPlane('service', { audit: true }), startControlPlanes(...TENANTS)]);
    await Promise.all([service, ...tenants].map((p) => installCrd(p.kubeConfig)));
    await acceptTokens(service, tokens);
    svc = new ClusterClient('service', service.kubeConfig);
    for (const t of tenants) client[t.name as (typeof TENANTS)[number]] = new ClusterClient(t.name, t.kubeConfig);
    for (const t of TENANTS) {
      await client[t]!.ensureNamespace('shop');
      await client[t]!.putConfigMap('shop', 'cfg', { v: '1' });
      await client[t]!.createDatabase('shop', 'orders', { configMapName: 'cfg' });
    }
    for (const r of REPLICAS) await start(r);
  });

  after(async () => {
    for (const r of REPLICAS) if (replicas[r]?.child.exitCode === null) await replicas[r]!.stop();
    await Promise.all([service?.stop(), ...tenants.map((t) => t.stop())]);
  });

  it('spreads six shards two by two, and every cluster syncs', async () => {
    const held = await spread(REPLICAS, 2, 90_000);
    console.log(`shards held: ${JSON.stringify(held)}`);
    await changeEverywhere('2', 60_000);
    for (const t of TENANTS) assert.ok(await svc.database(defaultCopyNamespace(t, 'shop'), 'orders'), `${t}'s primary is copied`);
    for (const r of REPLICAS) {
      const metrics = (await (await fetch(`http://127.0.0.1:${replicas[r]!.httpPort}/metrics`)).text()).split('\n');
      assert.ok(metrics.includes('relsync_shards 6'), `${r} says there are 6 shards`);
      const lines = metrics.filter((l) => l.startsWith('relsync_shard_held{') && l.includes('phase="working"') && l.endsWith(' 1'));
      assert.equal(lines.length, 2, `${r}'s metrics say two shards: ${lines.join('; ')}`);
    }
    const shown = await runCli(['inspect', 'shards', '--store', join(dir, 'r1', 'relsync.db'), '-o', 'json']);
    assert.equal(shown.code, 0, shown.stderr);
    const status = JSON.parse(shown.stdout) as { held: Array<{ shard: number; clusters: string[] }> };
    assert.deepEqual(status.held.map((h) => h.shard).sort(), [...held.r1!].sort());
    // Round-robin by name: t1 → shard 0, ..., t6 → shard 5.
    for (const h of status.held) assert.deepEqual(h.clusters, [TENANTS[h.shard]]);
    const primary = await runCli(['inspect', 'primary', 'databases.demo.relsync.dev', 'shop/orders', '--store', join(dir, 'r1', 'relsync.db'), '-o', 'json']);
    assert.equal(primary.code, 0, primary.stderr);
    assert.deepEqual((JSON.parse(primary.stdout) as Array<{ cluster: string }>).map((p) => p.cluster).sort(), held.r1!.map((s) => TENANTS[s]).sort(), 'inspect reads the stores of the shards it holds');
  });

  it("takes a SIGKILLed replica's shards over within a lease duration, and their clusters keep syncing", async () => {
    const before = await spread(REPLICAS, 2, 30_000);
    const orphaned = before.r3!;
    // A primary of a shard about to move, synced with a related copy, then too big to copy (an error that keeps its copies as they
    // are): its new holder's store never knew its relations, and its first sweep must not take the related copy for an orphan.
    const tenant = TENANTS[orphaned[0]!]!;
    const copyNs = defaultCopyNamespace(tenant, 'shop');
    await client[tenant]!.putConfigMap('shop', 'grow-cfg', { v: '1' });
    await client[tenant]!.createDatabase('shop', 'grow', { configMapName: 'grow-cfg' });
    await eventually('the related copy of the growing primary', () => svc.configMap(copyNs, 'grow-cfg'), 30_000);
    await client[tenant]!.updateDatabase('shop', 'grow', (db) => void (db.spec = { ...db.spec, blob: 'x'.repeat(4096) }));
    await replicas.r3!.waitForLog('the primary is too big', (l) => l.includes('relsync does not update the copy of this object') && l.includes('shop/grow'), 30_000);
    await replicas.r3!.kill();
    const at = Date.now();
    (killedAt.r3 ??= []).push(at);
    const after = await spread(['r1', 'r2'], 3, 30_000);
    const took = Date.now() - at;
    console.log(`the killed replica's shards ${orphaned.join(', ')} were held again ${took} ms after the kill (lease ${LEASE_SECONDS} s): ${JSON.stringify(after)}`);
    // A lease duration from the last renewal seen, plus a retry period to see it, plus the readiness poll.
    assert.ok(took < (LEASE_SECONDS + 3) * 1000, `took over after ${took} ms`);
    await changeEverywhere('3', 60_000);
    // The new holder's first sweep of that shard has finished: what it would delete, it has.
    const holder = (['r1', 'r2'] as const).find((r) => after[r]!.includes(orphaned[0]!))!;
    await replicas[holder]!.waitForLog(`${holder}'s first sweep of shard ${orphaned[0]}`, (l) => l.includes(`"shard":${orphaned[0]},`) && l.includes('"msg":"sweep finished"') && Date.parse((JSON.parse(l) as { time: string }).time) > at, 30_000);
    assert.ok(await svc.configMap(copyNs, 'grow-cfg'), 'the related copy of a primary kept in error is still there after the new holder swept');
    assert.ok(await svc.database(copyNs, 'grow'), 'and so is its copy');
  });

  it('gives a replica that comes back its share, and hands over at once on a clean stop', async () => {
    await start('r3');
    await spread(REPLICAS, 2, 60_000);
    await changeEverywhere('4', 60_000);
    const stoppedAt = Date.now();
    assert.equal(await replicas.r1!.stop(), 0);
    const handedOver = Date.now();
    await spread(['r2', 'r3'], 3, 30_000);
    const took = Date.now() - handedOver;
    console.log(`clean stop took ${handedOver - stoppedAt} ms; its shards were held again ${took} ms later`);
    assert.ok(took < LEASE_SECONDS * 1000, `released shards are taken without waiting for them to expire (${took} ms)`);
    await changeEverywhere('5', 60_000);
    await start('r1');
    await spread(REPLICAS, 2, 60_000);
  });

  it('stops the writes of a replica paused past its lease before it notices, and takes it back in when it resumes', async () => {
    const held = await spread(REPLICAS, 2, 30_000);
    const paused = replicas.r2!;
    paused.child.kill('SIGSTOP');
    try {
      await spread(['r1', 'r3'], 3, 30_000);
      // Changes of the paused replica's clusters, which its watches deliver when it resumes: work it would do at once.
      for (const shard of held.r2!) await client[TENANTS[shard]!]!.putConfigMap('shop', 'cfg', { v: 'while-paused' });
      for (const shard of held.r2!) {
        await eventually('the new holder syncs', async () => (await svc.configMap(defaultCopyNamespace(TENANTS[shard]!, 'shop'), 'cfg'))?.data?.v === 'while-paused' || undefined, 30_000);
      }
    } finally {
      paused.child.kill('SIGCONT');
    }
    for (const shard of held.r2!) await paused.waitForLog(`r2 loses shard ${shard}`, (l) => l.includes('"msg":"sharding: lost a shard') && l.includes(`"shard":${shard},`), 20_000);
    await spread(REPLICAS, 2, 60_000);
  });

  it('gives a replica killed and started again at once its own shards back, without waiting for them to expire', async () => {
    const before = await spread(REPLICAS, 2, 30_000);
    await replicas.r2!.kill();
    (killedAt.r2 ??= []).push(Date.now());
    const restartedAt = Date.now();
    await start('r2');
    const after = await spread(REPLICAS, 2, 30_000);
    const took = Date.now() - restartedAt;
    console.log(`restarted r2 held ${after.r2!.join(', ')} again ${took} ms after its start (before: ${before.r2!.join(', ')})`);
    assert.deepEqual([...after.r2!].sort(), [...before.r2!].sort(), 'the same shards: their Leases still named it');
    // No one held them meanwhile: their stores are resumed (a relist at most), not rebuilt.
    const resumed = () => replicas.r2!.log().split('\n').filter((l) => l.includes('resumes the shard\'s store')).length;
    await eventually('each shard taken back resumed its store', async () => resumed() >= before.r2!.length, 30_000);
    assert.doesNotMatch(replicas.r2!.log(), /builds the shard's store afresh/);
    await changeEverywhere('6', 60_000);
  });

  it('lets no sharded replica work beside a replica without shards (a rollout between the two), and takes over when it stops', async () => {
    for (const r of REPLICAS) assert.equal(await replicas[r]!.stop(), 0);
    // The same installation without shards: one replica leads for every cluster.
    const single = configFor('r1').replace(/r1\.yaml$/, 'single.yaml');
    const config = parse(readFileSync(configFor('r1'), 'utf8')) as Record<string, unknown>;
    mkdirSync(join(dir, 'single'), { recursive: true });
    writeFileSync(single, JSON.stringify({ ...config, sharding: { shards: 1 }, store: { path: join(dir, 'single', 'relsync.db') }, serviceCluster: { name: 'service', kubeconfig: service.kubeconfigPath } }));
    const leader = await startRelsync(single, join(dir, 'single.log'));
    try {
      await eventually('the replica without shards leads', async () => /^ok: leader/.test(await (await fetch(`http://127.0.0.1:${leader.httpPort}/readyz`)).text()) || undefined, 30_000);
      await start('r1');
      await replicas.r1!.waitForLog('r1 waits for the leader', /takes no shard while replicas of another config/, 20_000);
      await changeEverywhere('7', 60_000);
      assert.deepEqual(await heldBy('r1'), [], 'the sharded replica took nothing while the leader led');
    } finally {
      assert.equal(await leader.stop(), 0);
    }
    const stoppedAt = Date.now();
    await spread(['r1'], 6, 30_000);
    console.log(`the sharded replica took every shard ${Date.now() - stoppedAt} ms after the leader without shards stopped`);
    await start('r2');
    await start('r3');
    await spread(REPLICAS, 2, 60_000);
    // A marker after everything: once it arrived, every earlier write is in the audit log.
    await changeEverywhere('marker', 60_000);
  });

  it('never lets a replica write for a shard it did not hold at that moment (the audit log)', async () => {
    const holdings = holdingsFromLogs(logs, killedAt);
    const copyNamespaces = new Map(TENANTS.map((t, shard) => [defaultCopyNamespace(t, 'shop'), shard]));
    const { checked, problems } = writesOutsideHoldings(service.auditLogPath!, holdings, (ns) => copyNamespaces.get(ns), (user) => (user.startsWith('relsync-r') ? user.slice('relsync-'.length) : undefined));
    assert.deepEqual(problems, [], JSON.stringify(holdings));
    console.log(`${checked} writes of copies checked against ${holdings.length} holdings`);
    assert.ok(checked >= 6 * 5, `the copies' writes are in the audit log (${checked})`);
  });
});

// Selector and inverse rules find a new primary's related objects from the
// finder index (names the watches delivered) instead of a LIST per rule
// (src/cache/finder-index.ts). What could break: an object created while its
// primary's reconcile asks the index (it must still be copied), an index
// that did not follow a label change, a candidate of another namespace, and
// a tenant whose objects outgrow the index's budget (LISTs take over, and
// nothing is lost). Real API servers, relsync as a real process.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, GROUP, PLURAL, type ClusterClient } from '../harness/tenant.js';

const OWNER = 'finder.relsync.dev/owner';
const PRIMARIES = 24;

function configFor(clusters: Clusters<'tenant-a' | 'service'>, dir: string, indexBytes?: number): string {
  const { 'tenant-a': pa, service: ps } = clusters.plane;
  return writeConfig(dir, {
    agentName: 'e2e',
    platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
    serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
    store: { path: join(dir, 'relsync.db') },
    leaderElection: { enabled: false },
    ...(indexBytes !== undefined ? { cache: { indexBytes } } : {}),
    resources: [{ group: GROUP, resource: PLURAL, related: [
      { id: 'sel', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
      { id: 'inv', origin: 'platform', resource: 'secrets', inverse: { label: OWNER } },
    ] }],
  });
}

async function lookups(relsync: RelsyncProcess): Promise<{ index: number; list: number }> {
  const text = await (await fetch(`http://127.0.0.1:${relsync.httpPort}/metrics`)).text();
  const value = (how: string) => Number(new RegExp(`^relsync_finder_lookups_total\\{how="${how}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { index: value('index'), list: value('list') };
}

/** Runs `tasks` at most `width` at a time, in the order given. */
async function pool(tasks: ReadonlyArray<() => Promise<unknown>>, width: number): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < tasks.length) await tasks[next++]!();
  }));
}

describe('the finder index', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess | undefined;

  before(async () => {
    clusters = await startClusters('tenant-a', 'service');
    ({ 'tenant-a': a, service: svc } = clusters.client);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('finds every object created at the same moment as its primary, in any order, without a LIST', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-finder-'));
    relsync = await startRelsync(configFor(clusters, dir), join(dir, 'relsync.log'));
    for (let i = 0; i < PRIMARIES; i++) await a.ensureNamespace(`r${i}`);
    // Primaries, their selector matches and their inverse objects, interleaved and shuffled
    // (a fixed shuffle: a failure can be replayed), created ten at a time: many objects arrive
    // while their primary's reconcile is asking the index.
    const tasks: Array<() => Promise<unknown>> = [];
    for (let i = 0; i < PRIMARIES; i++) {
      tasks.push(() => a.createDatabase(`r${i}`, `p${i}`, {}));
      tasks.push(() => a.putConfigMap(`r${i}`, `p${i}-cm`, { n: String(i) }, { app: `p${i}` }));
      tasks.push(() => a.putSecret(`r${i}`, `p${i}-secret`, { n: String(i) }, { [OWNER]: `p${i}` }));
    }
    for (let i = tasks.length - 1; i > 0; i--) {
      const j = (i * 7919) % (i + 1);
      [tasks[i], tasks[j]] = [tasks[j]!, tasks[i]!];
    }
    await pool(tasks, 10);
    for (let i = 0; i < PRIMARIES; i++) {
      const ns = defaultCopyNamespace('tenant-a', `r${i}`);
      assert.equal((await eventually(`p${i}'s selector match copied`, () => svc.configMap(ns, `p${i}-cm`), 60_000)).data?.n, String(i));
      assert.equal(decode(await eventually(`p${i}'s inverse object copied`, () => svc.secret(ns, `p${i}-secret`), 60_000), 'n'), String(i));
    }
    const found = await lookups(relsync);
    assert.ok(found.index >= 2 * PRIMARIES, `every new primary's two rules asked the index (${JSON.stringify(found)})`);
    assert.equal(found.list, 0, 'no rule had to LIST');
  });

  it('follows a label change, and never proposes an object of another namespace', async () => {
    assert.ok(relsync);
    // A ConfigMap of r1 that names p0 (whose namespace is r0): never p0's.
    await a.putConfigMap('r1', 'decoy', { n: 'decoy' }, { app: 'p0' });
    // One that p1 finds, then moves to a primary created after the move.
    await a.putConfigMap('r1', 'mover', { n: 'mover' }, { app: 'p1' });
    const copies1 = defaultCopyNamespace('tenant-a', 'r1');
    await eventually('p1 finds the mover', () => svc.configMap(copies1, 'mover'));
    await a.putConfigMap('r1', 'mover', { n: 'mover' }, { app: 'late' });
    await eventually('p1 lets the mover go', async () => (await svc.configMap(copies1, 'mover')) === undefined);
    const before = await lookups(relsync);
    await a.createDatabase('r1', 'late', {});
    await eventually('a primary created after the move finds the mover', async () => (await svc.configMap(copies1, 'mover'))?.metadata?.labels?.app === 'late');
    const after = await lookups(relsync);
    assert.ok(after.index >= before.index + 2, `the new primary asked the index (${JSON.stringify({ before, after })})`);
    assert.equal(after.list, 0);
    // The marker: a match of p0 made after the decoy. Once it is copied, p0 has been reconciled
    // since the decoy existed, and the decoy must not have been copied for it.
    await a.putConfigMap('r0', 'marker', { n: 'marker' }, { app: 'p0' });
    const copies0 = defaultCopyNamespace('tenant-a', 'r0');
    await eventually('the marker is copied', () => svc.configMap(copies0, 'marker'));
    assert.equal(await svc.configMap(copies0, 'decoy'), undefined, 'an object of another namespace was copied for p0');
    assert.equal(await svc.configMap(copies1, 'decoy'), undefined, 'r1 has no primary p0');
    await relsync.stop();
    relsync = undefined;
  });

  it('LISTs again when a tenant\'s objects outgrow its budget, and loses nothing', async () => {
    // 15 KiB for the index (some 50 entries): the flood below passes it during the first LIST.
    await a.ensureNamespace('flood');
    await pool(Array.from({ length: 150 }, (_, i) => () => a.putConfigMap('flood', `f${i}`, { n: String(i) }, { app: `flood-${i}` })), 10);
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-finder-budget-'));
    relsync = await startRelsync(configFor(clusters, dir, 15 * 1024), join(dir, 'relsync.log'));
    await relsync.waitForLog('the index over its budget', /the finder index is over cache\.indexBytes/);
    await a.createDatabase('flood', 'flood-7', {});
    await a.putSecret('flood', 'flood-7-secret', { n: '7' }, { [OWNER]: 'flood-7' });
    const ns = defaultCopyNamespace('tenant-a', 'flood');
    assert.equal((await eventually('the selector match is copied (by a LIST)', () => svc.configMap(ns, 'f7'), 60_000)).data?.n, '7');
    await eventually('the inverse object is copied', () => svc.secret(ns, 'flood-7-secret'), 60_000);
    assert.equal(await svc.configMap(ns, 'f8'), undefined, 'another primary\'s label value was not copied');
    const found = await lookups(relsync);
    assert.ok(found.list >= 1, `the ConfigMaps' rule LISTed (${JSON.stringify(found)})`);
  });
});

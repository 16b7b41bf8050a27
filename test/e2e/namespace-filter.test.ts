// A PublishedResource's `spec.filter.namespace`: only primaries in namespaces whose labels match
// are synced. A namespace that starts matching brings its primaries in; one that stops matching
// takes their copies away (as a primary that stops matching `filter.resource`); a relabel while
// relsync was stopped is caught up at start. Real API servers, relsync as a real process.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writePublishedConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const MANIFEST = `
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: publish-databases
spec:
  resource: { apiGroup: demo.relsync.dev, versions: [v1alpha1], kind: Database }
  filter:
    namespace:
      matchLabels: { relsync-sync: "yes" }
  related:
    - identifier: config
      origin: kcp
      kind: ConfigMap
      object:
        reference:
          path: spec.configMapName
`;

describe('a namespace filter (PublishedResource spec.filter.namespace)', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let dir: string;
  let configPath: string;
  let relsync: RelsyncProcess;
  const copyNs = (ns: string) => defaultCopyNamespace('tenant-a', ns);

  const label = async (ns: string, labels: Record<string, string> | null) => {
    const current = await a.core.readNamespace({ name: ns });
    await a.core.replaceNamespace({ name: ns, body: { ...current, metadata: { ...current.metadata, labels: labels ?? {} } } });
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-nsfilter-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    ({ configPath } = writePublishedConfig(dir, { platform: pa.kubeconfigPath, service: ps.kubeconfigPath }, MANIFEST));
    for (const ns of ['ns-in', 'ns-out']) await a.ensureNamespace(ns);
    await label('ns-in', { 'relsync-sync': 'yes' });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('syncs primaries of a matching namespace only', async () => {
    await a.putConfigMap('ns-out', 'cfg', { v: 'out' });
    await a.createDatabase('ns-out', 'outside', { configMapName: 'cfg' });
    await a.putConfigMap('ns-in', 'cfg', { v: 'in' });
    await a.createDatabase('ns-in', 'inside', { configMapName: 'cfg' });
    await svc.copyOf(copyNs('ns-in'), 'inside');
    await eventually('its related object copied', async () => (await svc.configMap(copyNs('ns-in'), 'cfg'))?.data?.v === 'in', 30_000);
    // Marker: a change of the outside primary itself, after which its reconcile has provably run.
    await a.updateDatabase('ns-out', 'outside', (db) => void (db.metadata.labels = { marker: '1' }));
    await a.createDatabase('ns-in', 'marker', {});
    await svc.copyOf(copyNs('ns-in'), 'marker');
    assert.equal(await svc.database(copyNs('ns-out'), 'outside'), undefined, 'a primary in a namespace that does not match is not copied');
    assert.deepEqual((await a.database('ns-out', 'outside'))?.metadata.finalizers ?? [], [], 'nor given relsync\'s finalizer');
  });

  it('brings in the primaries of a namespace that starts matching', async () => {
    await label('ns-out', { 'relsync-sync': 'yes' });
    await svc.copyOf(copyNs('ns-out'), 'outside');
    await eventually('its related object copied', async () => (await svc.configMap(copyNs('ns-out'), 'cfg'))?.data?.v === 'out', 30_000);
  });

  it('takes away the copies of a namespace that stops matching, and lets its primaries go', async () => {
    await label('ns-out', { 'relsync-sync': 'no' });
    await eventually('the copy deleted', async () => (await svc.database(copyNs('ns-out'), 'outside')) === undefined, 30_000);
    await eventually('the finalizer removed', async () => ((await a.database('ns-out', 'outside'))?.metadata.finalizers ?? []).length === 0, 30_000);
    assert.equal(await svc.configMap(copyNs('ns-out'), 'cfg'), undefined, 'its related copy went too');
    assert.ok(await svc.database(copyNs('ns-in'), 'inside'), 'the other namespace keeps its copies');
  });

  it('catches up at start with a namespace relabelled while relsync was stopped', async () => {
    await relsync.stop();
    await label('ns-out', { 'relsync-sync': 'yes' });
    await label('ns-in', null);
    relsync = await startRelsync(configPath, join(dir, 'relsync-2.log'));
    await svc.copyOf(copyNs('ns-out'), 'outside');
    await eventually('the copy of the namespace that stopped matching deleted', async () => (await svc.database(copyNs('ns-in'), 'inside')) === undefined, 30_000);
  });
});

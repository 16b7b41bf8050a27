// Routing precision as a figure, end to end: with 100 primaries each selecting
// `app=<own name>`, a change of one matched object enqueues exactly one
// primary, and an object matched by two primaries' selectors exactly two.
// Read from relsync's own debug line per routed event. (The same property at
// 1,000 primaries is the router's: test/unit/controller/event-router.test.ts.)
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, GROUP, PLURAL, VERSION, type ClusterClient } from '../harness/tenant.js';

const PRIMARIES = 100;

interface Routed {
  msg: string;
  cluster: string;
  type: string;
  object: string;
  change: string;
  enqueued: number;
}

describe('routing precision', () => {
  let clusters: Clusters<'tenant-a' | 'service'> | undefined;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;
  const ns = defaultCopyNamespace('tenant-a', 'many');

  const routed = (cluster: string, object: string, change: string): Routed[] =>
    relsync
      .log()
      .split('\n')
      .filter((l) => l.includes('"routed event"') && l.includes(`"object":"${object}"`))
      .map((l) => JSON.parse(l) as Routed)
      .filter((r) => r.cluster === cluster && r.change === change);

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-precision-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    const config = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      workers: 8,
      resources: [
        {
          group: GROUP,
          resource: PLURAL,
          related: [
            { id: 'by-app', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
            { id: 'by-tier', origin: 'platform', resource: 'secrets', selector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['{{ object.spec.tier }}'] }] } },
          ],
        },
      ],
    });
    await a.ensureNamespace('many');
    const names = Array.from({ length: PRIMARIES }, (_, i) => `p${i}`);
    for (let i = 0; i < names.length; i += 25) {
      await Promise.all(
        names.slice(i, i + 25).map((name) =>
          a.objects.createNamespacedCustomObject({
            group: GROUP, version: VERSION, plural: PLURAL, namespace: 'many',
            body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Database', metadata: { name }, spec: name === 'p7' || name === 'p8' ? { tier: 'shared' } : {} },
          }),
        ),
      );
    }
    relsync = await startRelsync(config, join(dir, 'relsync.log'));
    const started = Date.now();
    await eventually(
      `all ${PRIMARIES} primaries copied`,
      async () => ((await svc.objects.listNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace: ns })) as { items: unknown[] }).items.length === PRIMARIES,
      180_000,
    );
    console.log(`initial sync of ${PRIMARIES} primaries: ${Date.now() - started} ms`);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it(`enqueues exactly the one owner of a changed object among ${PRIMARIES} primaries`, async () => {
    await a.putConfigMap('many', 'cm-p5', { v: '1' }, { app: 'p5' });
    await eventually('match copied', () => svc.configMap(ns, 'cm-p5'), 30_000);
    await a.putConfigMap('many', 'cm-p5', { v: '2' });
    await eventually('change copied', async () => (await svc.configMap(ns, 'cm-p5'))?.data?.v === '2', 30_000);
    const added = await eventually('routed ADDED line', async () => routed('tenant-a', 'many/cm-p5', 'ADDED')[0]);
    const modified = await eventually('routed MODIFIED line', async () => routed('tenant-a', 'many/cm-p5', 'MODIFIED')[0]);
    console.log(`primaries enqueued by one matched object's events: ADDED=${added.enqueued} MODIFIED=${modified.enqueued}`);
    assert.equal(added.enqueued, 1);
    assert.equal(modified.enqueued, 1);
    // the copy's own event, caused by relsync's write, is recognised and not routed back
    const ownWrite = await eventually('routed copy MODIFIED line', async () => routed('service', `${ns}/cm-p5`, 'MODIFIED')[0]);
    assert.equal(ownWrite.enqueued, 0, 'relsync\'s own write is not reconciled again');
    // a hand edit of the copy finds its single owner, and is repaired
    await svc.putConfigMap(ns, 'cm-p5', { v: 'tampered' });
    await eventually('hand edit repaired', async () => (await svc.configMap(ns, 'cm-p5'))?.data?.v === '2', 30_000);
    const edit = await eventually('routed hand edit', async () => routed('service', `${ns}/cm-p5`, 'MODIFIED').find((r) => r.enqueued > 0));
    assert.equal(edit.enqueued, 1);
  });

  it('enqueues exactly the two owners of an object matched by two selectors', async () => {
    await a.putSecret('many', 'shared-key', { k: 'v' });
    const s = await a.secret('many', 'shared-key');
    await a.core.replaceNamespacedSecret({ namespace: 'many', name: 'shared-key', body: { ...s!, metadata: { ...s!.metadata, labels: { tier: 'shared' } } } });
    await eventually('shared match copied', () => svc.secret(ns, 'shared-key'), 30_000);
    const modified = await eventually('routed MODIFIED line', async () => routed('tenant-a', 'many/shared-key', 'MODIFIED').at(-1));
    console.log(`primaries enqueued by an object two selectors match: ${modified.enqueued}`);
    assert.equal(modified.enqueued, 2);
    const unmatched = await eventually('routed ADDED line (no labels yet)', async () => routed('tenant-a', 'many/shared-key', 'ADDED')[0]);
    assert.equal(unmatched.enqueued, 0, 'before it had the label, no primary was enqueued');
  });
});

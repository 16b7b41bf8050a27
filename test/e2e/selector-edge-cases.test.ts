// The selector and inverse features the main selector test leaves out, each in
// a rule of its own: a selector with no equality term (routed through the
// store's short list of unanchored selectors), an empty selector that the rule
// allows explicitly, a selector on the cluster name, and an inverse rule that
// takes the owner's namespace from a label. Two tenants and a service
// cluster; relsync as a real process.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, twoTenantConfig, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const OWNER = 'edge.relsync.dev/owner';
const OWNER_NS = 'edge.relsync.dev/owner-namespace';

describe('selector and inverse edge cases', () => {
  let clusters: Clusters<'tenant-a' | 'tenant-b' | 'service'> | undefined;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;
  let dir: string;
  let relsync: RelsyncProcess;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-edge-'));
    clusters = await startClusters('tenant-a', 'tenant-b', 'service');
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = clusters.client);
    const configPath = writeConfig(dir, {
      ...twoTenantConfig(clusters, dir),
      resources: [
        {
          group: 'demo.relsync.dev',
          resource: 'databases',
          related: [
            // No equality term: Exists and NotIn only.
            { id: 'exposed', origin: 'platform', resource: 'configmaps', selector: { matchExpressions: [{ key: 'exposed', operator: 'Exists' }, { key: 'stage', operator: 'NotIn', values: ['draft'] }] } },
            // Every Secret of the namespace, because the rule says so.
            { id: 'all-secrets', origin: 'platform', resource: 'secrets', selector: { allowEmpty: true } },
            // The cluster name in a selector value.
            { id: 'by-cluster', origin: 'platform', resource: 'serviceaccounts', selector: { matchLabels: { 'edge.relsync.dev/for': '{{ cluster }}' } } },
            // The owner's namespace from a label: objects kept in another namespace of the same cluster.
            { id: 'elsewhere', origin: 'platform', resource: 'configmaps', inverse: { label: OWNER, namespaceFrom: { label: OWNER_NS }, rewrite: { template: 'from-{{ related.metadata.namespace }}-{{ value }}' } } },
          ],
        },
      ],
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('routes a selector without an equality term, both when an object starts and when it stops matching', async () => {
    await a.ensureNamespace('e1');
    await a.createDatabase('e1', 'orders', {});
    const ns = defaultCopyNamespace('tenant-a', 'e1');
    await eventually('primary copied', () => svc.database(ns, 'orders'));
    await a.putConfigMap('e1', 'public', { v: '1' }, { exposed: 'yes' });
    await a.putConfigMap('e1', 'draft', { v: '1' }, { exposed: 'yes', stage: 'draft' });
    await a.putConfigMap('e1', 'private', { v: '1' });
    await eventually('the match is copied', () => svc.configMap(ns, 'public'));
    await a.putConfigMap('e1', 'public', { v: '2' }, { exposed: 'yes' });
    await eventually('a later change follows', async () => (await svc.configMap(ns, 'public'))?.data?.v === '2');
    await a.putConfigMap('e1', 'draft', { v: '1' }, { exposed: 'yes', stage: 'final' });
    await eventually('an object that starts to match is copied', () => svc.configMap(ns, 'draft'));
    await a.putConfigMap('e1', 'public', { v: '2' }, {});
    await eventually('an object that loses its label is pruned', async () => (await svc.configMap(ns, 'public')) === undefined);
    assert.equal(await svc.configMap(ns, 'private'), undefined, 'never matched');
  });

  it('copies every object of the namespace for an empty selector the rule allows, and nothing of another namespace', async () => {
    await a.ensureNamespace('e2');
    await a.ensureNamespace('e2-other');
    await a.putSecret('e2', 'one', { k: '1' });
    await a.putSecret('e2-other', 'elsewhere', { k: '1' });
    await a.createDatabase('e2', 'orders', {});
    const ns = defaultCopyNamespace('tenant-a', 'e2');
    await eventually('an existing Secret is copied', () => svc.secret(ns, 'one'));
    await a.putSecret('e2', 'two', { k: '2' });
    await eventually('a new Secret is copied', () => svc.secret(ns, 'two'));
    await a.deleteSecret('e2', 'one');
    await eventually('a deleted Secret’s copy goes', async () => (await svc.secret(ns, 'one')) === undefined);
    assert.equal(await svc.secret(ns, 'elsewhere'), undefined);
    assert.equal(await svc.secret(defaultCopyNamespace('tenant-a', 'e2-other'), 'elsewhere'), undefined);
  });

  it('refuses an empty selector that the rule does not allow, naming the rule', async () => {
    const bad = writeConfig(dir, {
      platformClusters: [{ name: 'tenant-a', kubeconfig: clusters!.plane['tenant-a'].kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: clusters!.plane.service.kubeconfigPath },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [{ id: 'all', origin: 'platform', resource: 'secrets', selector: {} }] }],
    }, 'empty-selector.yaml');
    const out = await runCli(['validate', '--config', bad]);
    assert.equal(out.code, 2);
    assert.match(out.stderr, /resources\[0\]\.related\[0\]\.selector\.allowEmpty: an empty selector matches every object/);
  });

  it('selects by the cluster name, so each tenant finds only its own', async () => {
    for (const [client, cluster] of [[a, 'tenant-a'], [b, 'tenant-b']] as const) {
      await client.ensureNamespace('e3');
      await client.core.createNamespacedServiceAccount({ namespace: 'e3', body: { metadata: { name: `sa-${cluster}`, labels: { 'edge.relsync.dev/for': cluster } } } });
      // The other tenant's label value: never selected here.
      const other = cluster === 'tenant-a' ? 'tenant-b' : 'tenant-a';
      await client.core.createNamespacedServiceAccount({ namespace: 'e3', body: { metadata: { name: `not-mine-${cluster}`, labels: { 'edge.relsync.dev/for': other } } } });
      await client.createDatabase('e3', 'orders', {});
    }
    for (const cluster of ['tenant-a', 'tenant-b']) {
      const ns = defaultCopyNamespace(cluster, 'e3');
      await eventually(`${cluster}: its own service account is copied`, async () => (await svc.core.readNamespacedServiceAccount({ namespace: ns, name: `sa-${cluster}` }).catch(() => undefined)) !== undefined);
      const copied = (await svc.core.listNamespacedServiceAccount({ namespace: ns })).items.map((s) => s.metadata?.name);
      assert.ok(!copied.includes(`not-mine-${cluster}`), `${cluster}: ${copied.join(', ')}`);
    }
  });

  it('finds an inverse object in another namespace through namespaceFrom, within the same cluster only', async () => {
    await a.ensureNamespace('e4');
    await a.ensureNamespace('e4-configs');
    await a.createDatabase('e4', 'orders', {});
    const ns = defaultCopyNamespace('tenant-a', 'e4');
    await eventually('primary copied', () => svc.database(ns, 'orders'));
    await a.putConfigMap('e4-configs', 'orders-settings', { v: '1' }, { [OWNER]: 'orders', [OWNER_NS]: 'e4' });
    await eventually('copied into the primary’s copy namespace, renamed', async () => (await svc.configMap(ns, 'from-e4-configs-orders-settings'))?.data?.v === '1');
    await a.putConfigMap('e4-configs', 'orders-settings', { v: '2' }, { [OWNER]: 'orders', [OWNER_NS]: 'e4' });
    await eventually('a later change follows', async () => (await svc.configMap(ns, 'from-e4-configs-orders-settings'))?.data?.v === '2');
    // Tenant B names tenant A's primary: inverse rules never cross clusters.
    await b.ensureNamespace('e4-configs');
    await b.putConfigMap('e4-configs', 'intruder', { v: 'b' }, { [OWNER]: 'orders', [OWNER_NS]: 'e4' });
    await a.putConfigMap('e4-configs', 'orders-settings', { v: '3' }, { [OWNER]: 'orders', [OWNER_NS]: 'e4' });
    await eventually('tenant a’s change arrives', async () => (await svc.configMap(ns, 'from-e4-configs-orders-settings'))?.data?.v === '3');
    assert.equal(await svc.configMap(ns, 'from-e4-configs-intruder'), undefined);
    // The label goes: the copy goes.
    await a.putConfigMap('e4-configs', 'orders-settings', { v: '3' }, {});
    await eventually('pruned when it stops naming its owner', async () => (await svc.configMap(ns, 'from-e4-configs-orders-settings')) === undefined);
  });
});

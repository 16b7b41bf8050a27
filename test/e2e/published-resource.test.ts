// relsync configured only by an api-syncagent PublishedResource manifest,
// syncing both ways between real API servers (a Kubernetes platform cluster
// here; kcp is the other kind of platform).
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const manifest = `
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: publish-databases
spec:
  resource: { apiGroup: demo.relsync.dev, versions: [v1alpha1], kind: Database }
  filter:
    resource:
      matchLabels: { synced: "yes" }
  related:
    - identifier: config
      origin: kcp
      kind: ConfigMap
      object:
        reference:
          path: spec.configMapName
    - identifier: extras
      origin: kcp
      kind: ConfigMap
      object:
        selector:
          matchLabels: { app: "{{ .Object.metadata.name }}" }
          rewrite:
            regex: { pattern: "^(.*)$", replacement: "\\\\1-extra" }
    - identifier: credentials
      origin: service
      kind: Secret
      object:
        template:
          template: "{{ .Object.metadata.name }}-credentials"
`;

describe('a PublishedResource manifest as the config', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-pr-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    writeFileSync(join(dir, 'published.yaml'), manifest);
    const configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      publishedResourceFiles: ['published.yaml'],
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('syncs the filtered primaries and their related objects in both directions', async () => {
    await a.ensureNamespace('pr');
    const ns = defaultCopyNamespace('tenant-a', 'pr');
    await a.putConfigMap('pr', 'settings', { v: '1' });
    await a.putConfigMap('pr', 'tuning', { t: '1' }, { app: 'orders' });
    await a.createDatabase('pr', 'orders', { configMapName: 'settings' }, { synced: 'yes' });
    await a.createDatabase('pr', 'ignored', { configMapName: 'settings' });
    await eventually('reference copied', async () => (await svc.configMap(ns, 'settings'))?.data?.v === '1', 30_000);
    await eventually('selector match copied under its rewritten name', () => svc.configMap(ns, 'tuning-extra'), 30_000);
    await svc.putSecret(ns, 'orders-credentials', { password: 'p' });
    await eventually('service-side Secret copied back', async () => decode(await a.secret('pr', 'orders-credentials'), 'password') === 'p', 30_000);
    await a.putConfigMap('pr', 'settings', { v: '2' });
    await eventually('a related change without touching the primary', async () => (await svc.configMap(ns, 'settings'))?.data?.v === '2', 30_000);
    assert.equal(await svc.database(ns, 'ignored'), undefined, 'the filter keeps unlabelled primaries out');
  });
});

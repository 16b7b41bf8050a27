// A primary type given with several versions (`versions`, as api-syncagent's
// PublishedResource lists them): relsync syncs at a version both sides serve,
// also when the platform prefers one the service cluster does not have, and
// refuses to start, naming the field and what each side serves, when they
// share none. Real API servers with different CRDs of the same group.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually, installCrd } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace } from '../harness/tenant.js';

const GROUP = 'versions.relsync.dev';

/** A namespaced Widget CRD serving `versions` (the first stores), each with the same open schema. */
function widgetCrd(dir: string, file: string, versions: readonly string[]): URL {
  const path = join(dir, file);
  const schema = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  writeFileSync(path, JSON.stringify({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `widgets.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
      versions: versions.map((name, i) => ({ name, served: true, storage: i === 0, schema: { openAPIV3Schema: schema } })),
    },
  }));
  return pathToFileURL(path);
}

describe('a primary type with several versions', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let dir: string;
  let relsync: RelsyncProcess | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-versions-'));
    clusters = await startClusters('tenant-a', 'service');
    // The platform serves v1 and v2 and prefers v2 (the higher GA version); the service cluster serves v1 only.
    await installCrd(clusters.plane['tenant-a'].kubeConfig, widgetCrd(dir, 'platform-crd.json', ['v1', 'v2']));
    await installCrd(clusters.plane.service.kubeConfig, widgetCrd(dir, 'service-crd.json', ['v1']));
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  const config = (versions: string[], file: string) => writeConfig(dir, {
    agentName: 'e2e',
    platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
    serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
    store: { path: join(dir, `${file}.db`) },
    leaderElection: { enabled: false },
    resources: [{ group: GROUP, kind: 'Widget', versions }],
  }, `${file}.yaml`);

  it('syncs at the version both sides serve, not the platform\'s preferred one', async () => {
    const tenant = clusters.plane['tenant-a'].kubeConfig.makeApiClient(CustomObjectsApi);
    const service = clusters.plane.service.kubeConfig.makeApiClient(CustomObjectsApi);
    await clusters.client['tenant-a'].ensureNamespace('w');
    // Created at v2, the platform's preferred version: relsync must read it at v1.
    await tenant.createNamespacedCustomObject({ group: GROUP, version: 'v2', namespace: 'w', plural: 'widgets', body: { apiVersion: `${GROUP}/v2`, kind: 'Widget', metadata: { name: 'one' }, spec: { size: 3 } } });
    relsync = await startRelsync(config(['v2', 'v1'], 'both'), join(dir, 'both.log'));
    const ns = defaultCopyNamespace('tenant-a', 'w');
    const copy = await eventually('the copy in the service cluster', async () => {
      try {
        return (await service.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: ns, plural: 'widgets', name: 'one' })) as { spec?: { size?: number } };
      } catch {
        return undefined;
      }
    }, 30_000);
    assert.equal(copy.spec?.size, 3);
    // The copy's content alone cannot tell (both versions have one schema): relsync's own write to the
    // platform's primary, its finalizer, says at which version it read and wrote there.
    type Managed = { metadata: { managedFields?: Array<{ manager?: string; apiVersion?: string; fieldsV1?: { 'f:metadata'?: Record<string, unknown> } }> } };
    const finalizerWrite = await eventually("relsync's finalizer on the primary", async () => {
      const fresh = (await tenant.getNamespacedCustomObject({ group: GROUP, version: 'v2', namespace: 'w', plural: 'widgets', name: 'one' })) as Managed;
      return fresh.metadata.managedFields?.find((f) => f.fieldsV1?.['f:metadata']?.['f:finalizers'] !== undefined);
    }, 30_000);
    assert.equal(finalizerWrite.apiVersion, `${GROUP}/v1`, `relsync wrote the platform's primary at v1 (${finalizerWrite.manager ?? '?'}), not at the platform's preferred v2`);
    const current = (await tenant.getNamespacedCustomObject({ group: GROUP, version: 'v2', namespace: 'w', plural: 'widgets', name: 'one' })) as { spec: { size: number } };
    await tenant.replaceNamespacedCustomObject({ group: GROUP, version: 'v2', namespace: 'w', plural: 'widgets', name: 'one', body: { ...current, spec: { ...current.spec, size: 5 } } });
    await eventually('a change at v2 reaches the copy', async () => ((await service.getNamespacedCustomObject({ group: GROUP, version: 'v1', namespace: ns, plural: 'widgets', name: 'one' })) as { spec?: { size?: number } }).spec?.size === 5, 30_000);
    await relsync.stop();
    relsync = undefined;
  });

  it('refuses to start when the sides share none of the versions, and says what each serves', async () => {
    const out = await runCli(['sweep', '--config', config(['v2'], 'none'), '--log-level', 'error']);
    assert.notEqual(out.code, 0);
    assert.match(`${out.stdout}${out.stderr}`, /resources\[0\]\.versions: none of v2 serves Widget on every side \(of versions\.relsync\.dev, the platform tenant-a serves v2, v1; the service cluster service serves v1\)/);
    const absent = writeConfig(dir, { agentName: 'e2e', platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }], serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath }, store: { path: join(dir, 'absent.db') }, leaderElection: { enabled: false }, resources: [{ group: 'nowhere.relsync.dev', kind: 'Widget', versions: ['v1'] }] }, 'absent.yaml');
    const missing = await runCli(['sweep', '--config', absent, '--log-level', 'error']);
    assert.notEqual(missing.code, 0);
    assert.match(`${missing.stdout}${missing.stderr}`, /resources\[0\]\.versions: none of v1 serves Widget on every side \(of nowhere\.relsync\.dev, the platform tenant-a serves none; the service cluster service serves none\)/);
  });

  it('names the manifest\'s file and document when an imported PublishedResource cannot be resolved', async () => {
    writeFileSync(join(dir, 'published.yaml'), ['apiVersion: syncagent.kcp.io/v1alpha1', 'kind: PublishedResource', 'metadata: { name: widgets }', 'spec:', `  resource: { apiGroup: ${GROUP}, kind: Widget, versions: [v9, v8] }`, ''].join('\n'));
    const imported = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
      store: { path: join(dir, 'imported.db') },
      leaderElection: { enabled: false },
      publishedResourceFiles: ['published.yaml'],
    }, 'imported.yaml');
    const out = await runCli(['sweep', '--config', imported, '--log-level', 'error']);
    assert.equal(out.code, 2, out.stderr);
    assert.match(out.stderr, /publishedResourceFiles\[0\] \(published\.yaml\) PublishedResource 1 \(as resources\[0\]\.versions\): none of v9, v8 serves Widget on every side/);
  });
});

// Proves the control-plane harness: two real API servers side by side, a CRD,
// a custom resource and a Secret through client-node, a watch event, and the
// version that was built.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, CustomObjectsApi, VersionApi, Watch } from '@kubernetes/client-node';
import { KUBE_VERSION, startControlPlanes, type ControlPlane } from '../harness/control-plane.js';
import { eventually, installCrd } from '../harness/kube.js';

describe('control-plane harness', () => {
  let a: ControlPlane;
  let b: ControlPlane;

  before(async () => {
    [a, b] = (await startControlPlanes('alpha', 'beta')) as [ControlPlane, ControlPlane];
    await Promise.all([installCrd(a.kubeConfig), installCrd(b.kubeConfig)]);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('reports the Kubernetes version that was built', async () => {
    const version = await a.kubeConfig.makeApiClient(VersionApi).getCode();
    assert.equal(version.gitVersion, KUBE_VERSION);
  });

  it('keeps two control planes apart', async () => {
    const objects = a.kubeConfig.makeApiClient(CustomObjectsApi);
    const core = a.kubeConfig.makeApiClient(CoreV1Api);
    await objects.createNamespacedCustomObject({
      group: 'demo.relsync.dev', version: 'v1alpha1', namespace: 'default', plural: 'databases',
      body: { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { name: 'orders' }, spec: { size: 'small' } },
    });
    await core.createNamespacedSecret({
      namespace: 'default',
      body: { metadata: { name: 'orders-credentials' }, stringData: { password: 'hunter2' } },
    });

    const db = (await objects.getNamespacedCustomObject({
      group: 'demo.relsync.dev', version: 'v1alpha1', namespace: 'default', plural: 'databases', name: 'orders',
    })) as { spec: { size: string } };
    assert.equal(db.spec.size, 'small');
    const secret = await core.readNamespacedSecret({ namespace: 'default', name: 'orders-credentials' });
    assert.equal(Buffer.from(secret.data!.password!, 'base64').toString(), 'hunter2');

    const other = b.kubeConfig.makeApiClient(CustomObjectsApi);
    const list = (await other.listNamespacedCustomObject({
      group: 'demo.relsync.dev', version: 'v1alpha1', namespace: 'default', plural: 'databases',
    })) as { items: unknown[] };
    assert.equal(list.items.length, 0, 'the second control plane must not see the first one\'s objects');
  });

  it('delivers watch events for a custom resource', async () => {
    const events: Array<{ type: string; size: unknown }> = [];
    const req = await new Watch(a.kubeConfig).watch(
      '/apis/demo.relsync.dev/v1alpha1/namespaces/default/databases',
      {},
      (type, obj: { spec?: { size?: unknown } }) => events.push({ type, size: obj.spec?.size }),
      () => undefined,
    );
    try {
      const objects = a.kubeConfig.makeApiClient(CustomObjectsApi);
      await eventually('initial ADDED event', async () => events.some((e) => e.type === 'ADDED'));
      await objects.patchNamespacedCustomObject({
        group: 'demo.relsync.dev', version: 'v1alpha1', namespace: 'default', plural: 'databases', name: 'orders',
        body: [{ op: 'replace', path: '/spec/size', value: 'large' }],
      });
      await eventually('MODIFIED event with the new size', async () => events.some((e) => e.type === 'MODIFIED' && e.size === 'large'));
    } finally {
      req.abort();
    }
  });
});

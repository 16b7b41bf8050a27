// /metrics behind the service cluster's own authentication and authorization
// (--metrics-auth kubernetes, kubebuilder's default): tried with no token, a
// token that is not one, a ServiceAccount without the right, a tenant's
// ServiceAccount token from its own platform cluster (a valid token, of
// another API server), and Prometheus's ServiceAccount with `get /metrics`.
// The probes stay open: the kubelet calls them without a token.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';

/** A token of a new ServiceAccount in `default`, from the TokenRequest API. */
async function serviceAccountToken(kc: KubeConfig, name: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedServiceAccount({ namespace: 'default', body: { metadata: { name } } });
  const request = await core.createNamespacedServiceAccountToken({ namespace: 'default', name, body: { spec: { audiences: [], expirationSeconds: 3600 } } });
  return request.status!.token;
}

describe('/metrics protected by the service cluster (--metrics-auth kubernetes)', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let relsync: RelsyncProcess;
  const get = async (path: string, token?: string) => {
    const res = await fetch(`http://127.0.0.1:${relsync.httpPort}${path}`, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, body: await res.text(), challenge: res.headers.get('www-authenticate') };
  };

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-metrics-auth-'));
    clusters = await startClusters('tenant-a', 'service');
    relsync = await startRelsync(writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      resources: [{ group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases' }],
    }), join(dir, 'relsync.log'), ['--metrics-auth', 'kubernetes']);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('the probes answer without a token', async () => {
    assert.equal((await get('/healthz')).status, 200);
    await eventually('/readyz is 200', async () => (await get('/readyz')).status === 200, 30_000);
  });

  it('no token, or a token that is not one: 401 with a Bearer challenge, and no metric in the answer', async () => {
    for (const token of [undefined, 'not-a-token']) {
      const res = await get('/metrics', token);
      assert.equal(res.status, 401, String(token));
      assert.equal(res.challenge, 'Bearer');
      assert.doesNotMatch(res.body, /relsync_|process_/);
    }
  });

  it('a tenant\'s valid ServiceAccount token from its own platform cluster is not the service cluster\'s: 401', async () => {
    const tenantToken = await serviceAccountToken(clusters.plane['tenant-a'].kubeConfig, 'tenant-scraper');
    const res = await get('/metrics', tenantToken);
    assert.equal(res.status, 401);
    assert.doesNotMatch(res.body, /relsync_/);
  });

  it('a ServiceAccount of the service cluster without get on /metrics: 403; with it (a ClusterRole, as Prometheus gets): the metrics', async () => {
    const kc = clusters.plane.service.kubeConfig;
    const nobody = await serviceAccountToken(kc, 'nobody');
    const denied = await get('/metrics', nobody);
    assert.equal(denied.status, 403);
    assert.match(denied.body, /system:serviceaccount:default:nobody may not get \/metrics/);
    assert.doesNotMatch(denied.body, /relsync_/);

    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createClusterRole({ body: { metadata: { name: 'metrics-reader' }, rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }] } });
    await rbac.createClusterRoleBinding({ body: { metadata: { name: 'prometheus-metrics' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'metrics-reader' }, subjects: [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'default' }] } });
    const prometheus = await serviceAccountToken(kc, 'prometheus');
    const allowed = await eventually('/metrics for prometheus', async () => {
      const res = await get('/metrics', prometheus);
      return res.status === 200 ? res : undefined;
    }, 30_000);
    assert.match(allowed.body, /^relsync_primaries\{state="synced"\} /m);
    // The refusal of `nobody` was not a mistake the cache keeps for others: it is still refused.
    assert.equal((await get('/metrics', nobody)).status, 403);
  });
});

// /metrics behind the service cluster's own authentication and authorization
// (--metrics-auth kubernetes, kubebuilder's default): tried with no token, a
// token that is not one, a ServiceAccount without the right, a tenant's
// ServiceAccount token from its own platform cluster (a valid token, of
// another API server), and Prometheus's ServiceAccount with `get /metrics`;
// Prometheus through a flood of made-up tokens from several addresses; /explain
// with tokens minted for relsync's audience and for others; then the same port
// over TLS. The probes stay open: the kubelet calls them without a token.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { requestCounts } from '../harness/api-metrics.js';
import { selfSignedCertificate } from '../harness/certificates.js';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace } from '../harness/tenant.js';

/**
 * A token of a ServiceAccount in `default` (made the first time), from the TokenRequest API; for
 * `audiences`, or the API server's own by default.
 */
async function serviceAccountToken(kc: KubeConfig, name: string, audiences: string[] = []): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedServiceAccount({ namespace: 'default', body: { metadata: { name } } }).catch((err: { code?: number }) => {
    if (err.code !== 409) throw err;
  });
  const request = await core.createNamespacedServiceAccountToken({ namespace: 'default', name, body: { spec: { audiences, expirationSeconds: 3600 } } });
  return request.status!.token;
}

/** One GET of `path` from the local address `from` (127.0.0.x: a source of its own to relsync), on `agent`'s connections. */
function getFrom(agent: http.Agent, port: number, path: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path, agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

describe('/metrics protected by the service cluster (--metrics-auth kubernetes)', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let relsync: RelsyncProcess;
  let dir: string;
  const get = async (path: string, token?: string) => {
    const res = await fetch(`http://127.0.0.1:${relsync.httpPort}${path}`, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, body: await res.text(), challenge: res.headers.get('www-authenticate') };
  };
  /** `relsync explain` of shop/orders asked of the running relsync (or `server`) with `token`. */
  const ask = async (token: string, server = `http://127.0.0.1:${relsync.httpPort}`, extra: string[] = []) => {
    const file = join(dir, `token-${token.slice(-8)}`);
    writeFileSync(file, token);
    return runCli(['explain', 'databases.demo.relsync.dev', 'shop/orders', '--server', server, '--token-file', file, ...extra]);
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-metrics-auth-'));
    clusters = await startClusters('tenant-a', 'service');
    relsync = await startRelsync(writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      resources: [{ group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases' }],
    }), join(dir, 'relsync.log'), ['--metrics-auth', 'kubernetes', '--metrics-auth-cache-ttl', '1']);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('the probes answer without a token; a warning says that tokens come over plain HTTP', async () => {
    assert.equal((await get('/healthz')).status, 200);
    await eventually('/readyz is 200', async () => (await get('/readyz')).status === 200, 30_000);
    await relsync.waitForLog('the clear-text warning', /"level":"warn".*over plain HTTP.*--tls-cert-file/);
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

  it('keeps Prometheus\'s scrapes answered through a flood of made-up tokens from 8 addresses, at a bounded cost in TokenReviews', async () => {
    const kc = clusters.plane.service.kubeConfig;
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createClusterRoleBinding({ body: { metadata: { name: 'prometheus-2-metrics' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'metrics-reader' }, subjects: [{ kind: 'ServiceAccount', name: 'prometheus-2', namespace: 'default' }] } });
    const prometheus = await serviceAccountToken(kc, 'prometheus-2');
    await eventually('/metrics for prometheus-2', async () => (await get('/metrics', prometheus)).status === 200, 30_000);
    const reviews = async () => (await requestCounts(clusters.plane.service, new Set(['POST']))).get('POST tokenreviews.authentication.k8s.io') ?? 0;
    const reviewsBefore = await reviews();
    // relsync trusts an allow for 1 s here (--metrics-auth-cache-ttl 1): Prometheus's token is reviewed again
    // about ten times while the flood runs, each time while every slot for unknown tokens is wanted.
    const floodMs = 10_000;
    const sources = Array.from({ length: 8 }, (_, i) => new http.Agent({ keepAlive: true, maxSockets: 4, localAddress: `127.0.0.${i + 2}` } as http.AgentOptions));
    const flooded = new Map<number, number>();
    const until = Date.now() + floodMs;
    const flood = sources.flatMap((agent) => Array.from({ length: 4 }, async () => {
      while (Date.now() < until) {
        const status = await getFrom(agent, relsync.httpPort, '/metrics', randomBytes(24).toString('base64url'));
        flooded.set(status, (flooded.get(status) ?? 0) + 1);
      }
    }));
    const scrapes: Array<{ status: number; ms: number }> = [];
    const scraper = (async () => {
      while (Date.now() < until) {
        const started = performance.now();
        const res = await get('/metrics', prometheus);
        scrapes.push({ status: res.status, ms: Math.round(performance.now() - started) });
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    await Promise.all([...flood, scraper]);
    for (const agent of sources) agent.destroy();
    const reviewed = (await reviews()) - reviewsBefore;
    const floodTotal = [...flooded.values()].reduce((a, b) => a + b, 0);
    const slowest = Math.max(...scrapes.map((x) => x.ms));
    console.log(`flood: ${floodTotal} requests (${JSON.stringify(Object.fromEntries(flooded))}); Prometheus: ${scrapes.length} scrapes, slowest ${slowest} ms; TokenReviews during the flood: ${reviewed}`);
    assert.ok(floodTotal > 1000, `the flood was one (${floodTotal} requests)`);
    assert.deepEqual(scrapes.filter((x) => x.status !== 200), [], 'every scrape answered 200');
    assert.ok(slowest < 2000, `every scrape within 2 s (slowest ${slowest} ms)`);
    // Each address: 5 at once, then 1 a second; Prometheus's token about once a second.
    const bound = sources.length * (5 + floodMs / 1000 + 1) + (floodMs / 1000 + 3);
    assert.ok(reviewed <= bound, `TokenReviews during the flood: ${reviewed}, at most ${bound}`);
  });

  it('relsync explain --server asks the leader over HTTP, for a token minted for relsync whose user may get /explain (a token for /metrics, or for another audience, is not enough)', async () => {
    await clusters.client['tenant-a'].ensureNamespace('shop');
    await clusters.client['tenant-a'].createDatabase('shop', 'orders', { size: 'small' });
    await clusters.client.service.copyOf(defaultCopyNamespace('tenant-a', 'shop'), 'orders');
    const kc = clusters.plane.service.kubeConfig;
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createClusterRoleBinding({ body: { metadata: { name: 'scraper-metrics' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'metrics-reader' }, subjects: [{ kind: 'ServiceAccount', name: 'scraper', namespace: 'default' }] } });
    // The binding is in force (the scraper's token reads /metrics) before /explain is refused to it: a refusal of its own.
    const scraperForMetrics = await serviceAccountToken(kc, 'scraper');
    await eventually('the scraper reads /metrics', async () => (await get('/metrics', scraperForMetrics)).status === 200, 30_000);
    const refused = await ask(await serviceAccountToken(kc, 'scraper', ['relsync']));
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /answered 403: system:serviceaccount:default:scraper may not get \/explain/);
    assert.doesNotMatch(refused.stdout, /shop\/orders/);

    await rbac.createClusterRole({ body: { metadata: { name: 'relsync-explainer' }, rules: [{ nonResourceURLs: ['/explain'], verbs: ['get'] }] } });
    await rbac.createClusterRoleBinding({ body: { metadata: { name: 'oncall-explain' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'relsync-explainer' }, subjects: [{ kind: 'ServiceAccount', name: 'oncall', namespace: 'default' }] } });
    const oncall = await serviceAccountToken(kc, 'oncall', ['relsync']);
    const answered = await eventually('explain over HTTP', async () => {
      const out = await ask(oncall);
      return out.code === 0 && /^why: synced/m.test(out.stdout) ? out : undefined;
    }, 30_000);
    assert.match(answered.stdout, /^databases\.demo\.relsync\.dev shop\/orders$/m);
    assert.match(answered.stdout, /primary in tenant-a: synced/);
    // The same user's tokens for the API server's own audience and for another service: refused, though the user may get /explain.
    for (const audiences of [[], ['vault']]) {
      const other = await ask(await serviceAccountToken(kc, 'oncall', audiences));
      assert.equal(other.code, 1, JSON.stringify(audiences));
      assert.match(other.stderr, /answered 401: the token is not valid for the audience relsync/, JSON.stringify(audiences));
      assert.doesNotMatch(other.stdout, /shop\/orders/);
    }
    // Without a token: 401 with a challenge; anything but GET: 405; a name that is no object's: 400, before any read.
    const base = `http://127.0.0.1:${relsync.httpPort}/explain?type=databases.demo.relsync.dev`;
    const anonymous = await fetch(`${base}&object=shop/orders`);
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer');
    assert.equal((await fetch(`${base}&object=shop/orders`, { method: 'POST', headers: { authorization: `Bearer ${oncall}` } })).status, 405);
    for (const object of ['shop/..', '../.', 'shop/a/b']) assert.equal((await fetch(`${base}&object=${encodeURIComponent(object)}`, { headers: { authorization: `Bearer ${oncall}` } })).status, 400, object);
  });

  it('serves the port over TLS with --tls-cert-file and --tls-private-key-file: the metrics and explain over https, nothing over plain HTTP, no clear-text warning', async () => {
    await relsync.stop();
    const certificate = selfSignedCertificate(dir, 'relsync-metrics');
    const other = selfSignedCertificate(dir, 'other');
    // A flag without its pair, or a key that is not the certificate's: exit 2 before anything starts, the file named.
    const config = join(dir, 'relsync.yaml');
    const alone = await runCli(['run', '--config', config, '--tls-cert-file', certificate.certFile]);
    assert.equal(alone.code, 2);
    assert.match(alone.stderr, /--tls-cert-file and --tls-private-key-file go together/);
    const mismatch = await runCli(['run', '--config', config, '--tls-cert-file', certificate.certFile, '--tls-private-key-file', other.keyFile]);
    assert.equal(mismatch.code, 2);
    assert.match(mismatch.stderr, new RegExp(`--tls-private-key-file ${other.keyFile}: not the key of ${certificate.certFile}`));
    relsync = await startRelsync(join(dir, 'relsync.yaml'), join(dir, 'relsync-tls.log'), ['--metrics-auth', 'kubernetes', '--tls-cert-file', certificate.certFile, '--tls-private-key-file', certificate.keyFile]);
    const kc = clusters.plane.service.kubeConfig;
    const prometheus = await serviceAccountToken(kc, 'prometheus-2');
    const getTls = (path: string, token?: string) => new Promise<{ status: number; body: string; fingerprint: string }>((resolve, reject) => {
      https.get({ host: '127.0.0.1', port: relsync.httpPort, path, ca: certificate.pem, agent: false, headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
        const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, fingerprint }));
      }).on('error', reject);
    });
    const probe = await getTls('/healthz');
    assert.deepEqual([probe.status, probe.fingerprint], [200, certificate.fingerprint256], 'the probe, without a token, over TLS with the given certificate');
    const scrape = await eventually('/metrics over https', async () => {
      const res = await getTls('/metrics', prometheus);
      return res.status === 200 ? res : undefined;
    }, 30_000);
    assert.match(scrape.body, /^relsync_primaries\{state="synced"\} /m);
    await assert.rejects(fetch(`http://127.0.0.1:${relsync.httpPort}/healthz`), 'plain HTTP gets no answer');
    const oncall = await serviceAccountToken(kc, 'oncall', ['relsync']);
    const answered = await ask(oncall, `https://localhost:${relsync.httpPort}`, ['--certificate-authority', certificate.certFile]);
    assert.equal(answered.code, 0, answered.stderr);
    assert.match(answered.stdout, /primary in tenant-a: synced/);
    const untrusted = await ask(oncall, `https://localhost:${relsync.httpPort}`);
    assert.equal(untrusted.code, 1, 'a certificate the CLI was not told to trust');
    assert.match(untrusted.stderr, /cannot reach .*(self-signed|certificate)/);
    // A refusal is logged (debug) after anything written at start: once it is in the file, the clear-text warning would be too.
    assert.equal((await getTls('/metrics')).status, 401);
    await relsync.waitForLog('the refusal of a scrape without a token', /\/metrics refused/);
    assert.doesNotMatch(relsync.log(), /over plain HTTP/);
  });
});

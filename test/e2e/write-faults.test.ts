// The write side under faults, with sweeps off (a sweep is the last safety
// net, never the retry mechanism): a related write answered 500, 503, 429
// with Retry-After, or reset by a fault proxy is retried; a write the service
// cluster refuses is parked and reported; a copy into a platform namespace
// that does not exist yet arrives; credentials that rotate (a token file, an
// exec plugin) keep working without a restart; a replica killed with SIGKILL
// and started again with its store leads again at once.
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { acceptTokens } from '../harness/control-plane.js';
import { startFaultProxy, type FaultAction, type FaultProxy } from '../harness/fault-proxy.js';
import { eventually } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, GROUP, type ClusterClient } from '../harness/tenant.js';

describe('write faults, credentials and restarts', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let proxy: FaultProxy;
  let tenantProxy: FaultProxy;
  let dir: string;
  let configPath: string;
  let relsync: RelsyncProcess;
  let pid: number;
  const serviceTokenFile = () => join(dir, 'service-token');
  const tenantTokenFile = () => join(dir, 'tenant-token');
  const execRuns = () => join(dir, 'exec-runs');
  let kubeconfig: (name: string, server: string, ca: string, user: Record<string, unknown>) => string;
  const caOf = (path: string) => /certificate-authority-data: ([A-Za-z0-9+/=]+)/.exec(readFileSync(path, 'utf8'))![1]!;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-write-faults-'));
    clusters = await startClusters('tenant-a', 'service');
    ({ 'tenant-a': a, service: svc } = clusters.client);
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    // relsync's own credentials: a token file for the service cluster (kubectl's spelling
    // `tokenFile`, with the trailing newline such files have), an exec plugin for the tenant.
    writeFileSync(serviceTokenFile(), 'relsync-service-1\n');
    writeFileSync(tenantTokenFile(), 'relsync-tenant-1');
    await Promise.all([acceptTokens(ps, { relsync: 'relsync-service-1' }), acceptTokens(pa, { relsync: 'relsync-tenant-1', limited: { token: 'relsync-limited', groups: ['relsync-limited'] } })]);
    // A second relsync below may do everything it needs on the tenant except create namespaces.
    const rbac = a.objects;
    await rbac.createClusterCustomObject({ group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterroles', body: {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'relsync-limited' },
      rules: [
        { apiGroups: [''], resources: ['configmaps', 'secrets', 'events'], verbs: ['*'] },
        { apiGroups: [GROUP], resources: ['databases', 'databases/status'], verbs: ['*'] },
        { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
      ],
    } });
    await rbac.createClusterCustomObject({ group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterrolebindings', body: {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'relsync-limited' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'relsync-limited' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'relsync-limited' }],
    } });
    proxy = await startFaultProxy(ps);
    tenantProxy = await startFaultProxy(pa, 'tenant-proxy');
    const plugin = join(dir, 'exec-token.sh');
    writeFileSync(plugin, `#!/bin/sh\necho run >> '${execRuns()}'\nprintf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"%s"}}' "$(cat '${tenantTokenFile()}')"\n`);
    chmodSync(plugin, 0o755);
    kubeconfig = (name: string, server: string, ca: string, user: Record<string, unknown>) => {
      const path = join(dir, `${name}.kubeconfig`);
      writeFileSync(path, JSON.stringify({
        apiVersion: 'v1', kind: 'Config', 'current-context': name,
        clusters: [{ name, cluster: { server, 'certificate-authority-data': ca } }],
        users: [{ name: 'relsync', user }],
        contexts: [{ name, context: { cluster: name, user: 'relsync' } }],
      }));
      return path;
    };
    configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: kubeconfig('tenant-a', tenantProxy.url, caOf(pa.kubeconfigPath), { exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: plugin, args: [] } }) }],
      serviceCluster: { name: 'service', kubeconfig: kubeconfig('service', proxy.url, caOf(ps.kubeconfigPath), { tokenFile: serviceTokenFile() }) },
      store: { path: join(dir, 'relsync.db') },
      // Sweeps off: every retry below is the reconciler's own.
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      // Reads go to the API server, where the 404 test injects its faults (what relsync reads when
      // the cache lacks an object; reads from the cache: watch-reads.test.ts).
      cache: { bytes: 0 },
      resources: [
        {
          group: GROUP,
          resource: 'databases',
          related: [
            { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
            { id: 'landing', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-creds' }, namespace: { destination: 'landing-{{ name }}' } },
          ],
        },
      ],
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
    pid = relsync.child.pid!;
    await a.ensureNamespace('faults');
  });

  after(async () => {
    await relsync?.stop();
    await proxy?.close();
    await tenantProxy?.close();
    await clusters?.stop();
  });

  const ns = defaultCopyNamespace('tenant-a', 'faults');

  async function primaryState(name: string): Promise<{ state: string; relations: Array<{ rule: string; state: string }> }> {
    const out = await runCli(['inspect', 'primary', `databases.${GROUP}`, `faults/${name}`, '--cluster', 'tenant-a', '--config', configPath, '-o', 'json']);
    return (JSON.parse(out.stdout) as Array<{ state: string; relations: Array<{ rule: string; state: string }> }>)[0]!;
  }

  async function syncedPair(name: string): Promise<RegExp> {
    await a.putConfigMap('faults', `${name}-cfg`, { v: '1' });
    await a.createDatabase('faults', name, { configMapName: `${name}-cfg` });
    await eventually(`${name} synced`, () => svc.configMap(ns, `${name}-cfg`), 30_000);
    // A marker change, processed last: no reconcile of this primary is left in flight, so the write
    // a test faults next is the only one, and a later write can only be the retry.
    await a.putConfigMap('faults', `${name}-cfg`, { v: 'settled' });
    await eventually(`${name} settled`, async () => (await svc.configMap(ns, `${name}-cfg`))?.data?.v === 'settled', 30_000);
    return new RegExp(`^/api/v1/namespaces/${ns}/configmaps/${name}-cfg$`);
  }

  const transient: Array<[string, FaultAction]> = [
    ['http-503', { kind: 'status', status: 503 }],
    ['http-500', { kind: 'status', status: 500 }],
    ['http-429', { kind: 'status', status: 429, retryAfterSeconds: 1 }],
    ['reset', { kind: 'reset' }],
  ];
  for (const [name, action] of transient) {
    it(`retries a related write answered ${name} until it lands, with sweeps off`, async () => {
      const path = await syncedPair(name);
      const from = proxy.requests.length;
      proxy.inject({ method: 'PATCH', path, times: 1, action });
      const changedAt = Date.now();
      await a.putConfigMap('faults', `${name}-cfg`, { v: '2' });
      await eventually('the change arrives after the fault', async () => (await svc.configMap(ns, `${name}-cfg`))?.data?.v === '2', 20_000);
      const patches = () => proxy.requests.slice(from).filter((r) => r.method === 'PATCH' && path.test(r.path));
      // The change can be read from the API server before the proxy has finished passing its answer on.
      await eventually('the proxy passed on the answer of the write that landed', async () => patches().at(-1)?.status !== undefined, 5_000);
      const writes = patches();
      assert.equal(writes[0]?.fault, action.kind, 'the first write met the fault');
      assert.equal(writes.at(-1)?.status, 200, 'a later write landed');
      if (action.kind === 'status' && action.retryAfterSeconds) assert.ok(writes[1]!.at - writes[0]!.at >= 1000, `Retry-After honoured (${writes[1]!.at - writes[0]!.at} ms)`);
      console.log(`${name}: the change arrived ${Date.now() - changedAt} ms after it was made (${writes.length} writes)`);
      await eventually('the primary and its relation read as synced', async () => {
        const p = await primaryState(name);
        return p.state === 'synced' && p.relations.find((r) => r.rule === 'config')?.state === 'synced';
      });
    });
  }

  it('does not take a 404 of the whole path for a deleted primary', async () => {
    await syncedPair('ghost');
    const uids = async () => ({ copy: (await svc.database(ns, 'ghost'))?.metadata.uid, related: (await svc.configMap(ns, 'ghost-cfg'))?.metadata?.uid });
    const before = await uids();
    const path = /^\/apis\/demo\.relsync\.dev\/v1alpha1\/namespaces\/faults\/databases\/ghost$/;
    const from = tenantProxy.requests.length;
    // What an API server answers for a type it does not serve at the moment: not a Status, no object named.
    tenantProxy.inject({ method: 'GET', path, times: 3, action: { kind: 'status', status: 404, text: '404 page not found\n' } });
    await a.putConfigMap('faults', 'ghost-cfg', { v: '2' });
    await eventually('the change arrives once the type is served again', async () => (await svc.configMap(ns, 'ghost-cfg'))?.data?.v === '2', 20_000);
    assert.equal(tenantProxy.requests.slice(from).filter((r) => path.test(r.path) && r.fault === 'status').length, 3, 'the primary was read through three 404s');
    assert.deepEqual(await uids(), before, 'the copies were not deleted for a primary that only seemed gone');
  });

  it('parks a write the service cluster refuses, reports it, and does not read as synced until a change fixes it', async () => {
    const path = await syncedPair('refused');
    const from = proxy.requests.length;
    proxy.inject({ method: 'PATCH', path, times: 1, action: { kind: 'status', status: 422 } });
    await a.putConfigMap('faults', 'refused-cfg', { v: '2' });
    const parked = await eventually('the primary reads as error', async () => {
      const p = await primaryState('refused');
      return p.state === 'error' && p;
    }, 20_000);
    assert.equal(parked.relations.find((r) => r.rule === 'config')?.state, 'error');
    assert.ok((await a.events('faults', 'refused')).some((e) => e.reason === 'RelatedSyncFailed' && /422/.test(e.message ?? '')), 'an Event says why');
    assert.equal(proxy.requests.slice(from).filter((r) => r.method === 'PATCH' && path.test(r.path)).length, 1, 'one write');
    // The reconcile that met the refusal ended as done (it saved the error state), so no retry was scheduled.
    assert.doesNotMatch(relsync.log(), /"primary":"tenant-a:databases\.demo\.relsync\.dev:faults\/refused"[^\n]*reconcile failed/, 'no retry loop');
    await a.putConfigMap('faults', 'refused-cfg', { v: '3' });
    await eventually('the next change lands', async () => (await svc.configMap(ns, 'refused-cfg'))?.data?.v === '3', 20_000);
    await eventually('and the primary reads as synced', async () => (await primaryState('refused')).state === 'synced');
  });

  it('creates the platform namespace a service-origin copy goes to', async () => {
    await a.createDatabase('faults', 'landed', {});
    await svc.putSecret(ns, 'landed-creds', { password: 'p' }, undefined, await svc.copyOf(ns, 'landed'));
    const copy = await eventually('the copy arrives in a namespace that did not exist', () => a.secret('landing-landed', 'landed-creds'), 20_000);
    assert.equal(decode(copy, 'password'), 'p');
  });

  it('says so when it may not create that namespace, and delivers once the tenant creates it', async () => {
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    const config = writeConfig(dir, {
      agentName: 'limited',
      platformClusters: [{ name: 'tenant-a', kubeconfig: kubeconfig('tenant-a-limited', pa.url, caOf(pa.kubeconfigPath), { token: 'relsync-limited' }) }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: join(dir, 'limited.db') },
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      leaderElection: { enabled: false },
      // Its own copy namespace, beside the other relsync's copies of the same primary.
      resources: [{ group: GROUP, resource: 'databases', selector: { matchLabels: { limited: 'yes' } }, naming: { namespace: 'limited-{{ namespace }}' }, related: [
        { id: 'landing', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-creds' }, namespace: { destination: 'walled-{{ name }}' } },
      ] }],
    }, 'limited.yaml');
    const limited = await startRelsync(config, join(dir, 'limited.log'));
    try {
      await a.createDatabase('faults', 'walled', {}, { limited: 'yes' });
      await svc.putSecret('limited-faults', 'walled-creds', { password: 'p' }, undefined, await svc.copyOf('limited-faults', 'walled'));
      await eventually('an Event names the namespace relsync may not create', async () => (await a.events('faults', 'walled')).some((e) => e.reason === 'RelatedSyncFailed' && /namespace "walled-walled" does not exist .* may not create it/.test(e.message ?? '')), 30_000);
      await a.ensureNamespace('walled-walled');
      const createdAt = Date.now();
      const copy = await eventually('the copy arrives once the tenant created the namespace', () => a.secret('walled-walled', 'walled-creds'), 45_000);
      assert.equal(decode(copy, 'password'), 'p');
      console.log(`namespace created by the tenant: the copy arrived ${Date.now() - createdAt} ms later (relsync looks again every 30 s)`);
    } finally {
      await limited.stop();
    }
  });

  it('keeps working when its token file and its exec plugin\'s token are rotated and the old ones stop working', async () => {
    await syncedPair('rotate');
    const runsBefore = readFileSync(execRuns(), 'utf8').split('\n').filter(Boolean).length;
    writeFileSync(serviceTokenFile(), 'relsync-service-2\n');
    writeFileSync(tenantTokenFile(), 'relsync-tenant-2');
    await Promise.all([acceptTokens(clusters.plane.service, { relsync: 'relsync-service-2' }), acceptTokens(clusters.plane['tenant-a'], { relsync: 'relsync-tenant-2' })]);
    const rotatedAt = Date.now();
    await a.putConfigMap('faults', 'rotate-cfg', { v: 'after-rotation' });
    await a.putConfigMap('faults', 'rotate2-cfg', { v: '1' });
    await a.createDatabase('faults', 'rotate2', { configMapName: 'rotate2-cfg' });
    await eventually('a change after the rotation arrives', async () => (await svc.configMap(ns, 'rotate-cfg'))?.data?.v === 'after-rotation', 60_000);
    await eventually('a primary created after the rotation is copied', () => svc.configMap(ns, 'rotate2-cfg'), 60_000);
    const converged = Date.now() - rotatedAt;
    console.log(`credentials rotated: converged ${converged} ms after both API servers took only the new tokens`);
    assert.ok(converged < 10_000, 'after a 401, not after the 30 s refresh');
    assert.equal(relsync.child.exitCode, null);
    assert.equal(relsync.child.pid, pid, 'the same process');
    assert.ok(readFileSync(execRuns(), 'utf8').split('\n').filter(Boolean).length > runsBefore, 'the exec plugin ran again');
  });

  it('leads again at once after SIGKILL, and refuses a second process on the same store', async () => {
    await syncedPair('killed');
    await relsync.kill();
    await a.putConfigMap('faults', 'killed-cfg', { v: 'while-down' });
    const spawnedAt = Date.now();
    relsync = await startRelsync(configPath, join(dir, 'relsync-2.log'));
    // From the moment the process serves: Node.js itself takes seconds to start on a loaded 2-core
    // machine (`relsync --help` took 5 s beside a CI run), which is not what this measures.
    const startedAt = Date.now();
    await eventually('the change made while it was down arrives', async () => (await svc.configMap(ns, 'killed-cfg'))?.data?.v === 'while-down', 30_000);
    const ms = Date.now() - startedAt;
    console.log(`restart after SIGKILL: the change made while down arrived ${ms} ms after the process served (${Date.now() - spawnedAt} ms after it was spawned; lease duration 15 s)`);
    assert.ok(ms < 2_500, `within 2.5 s of start (${ms} ms; the issue's target is 2 s)`);

    const second = await runCli(['run', '--config', configPath, '--no-http']);
    assert.equal(second.code, 1);
    assert.match(second.stdout + second.stderr, /in use by another relsync process/);
  });
});

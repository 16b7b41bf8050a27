// deploy/admission-policy.yaml on a real API server: relsync's identity may
// create, change and delete only objects that carry its mark. relsync runs
// under deploy/'s ServiceAccount token, config, RBAC and that policy through
// a primary's life — a copy namespace it makes and one the provider made, a
// related copy it creates and one it adopts (granted by the provider), the
// operator's Secret coming back, the content-hash key, its Lease, and the
// deletion of a primary with its copies — and no request of its is refused.
// Then the same token tries what relsync never does: writes to objects
// without the mark (ConfigMaps, Secrets where RBAC allows them, a namespace),
// and a grant the policy must not honour. Each is refused by the policy, by
// name, while the same writes to marked objects pass.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { kubectlPath, startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { eventually, installCrd } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { ClusterClient, defaultCopyNamespace } from '../harness/tenant.js';

const deploy = fileURLToPath(new URL('../../../deploy', import.meta.url));
const RELSYNC_USER = 'system:serviceaccount:relsync-system:relsync';
const POLICY = /ValidatingAdmissionPolicy 'relsync-demo-writes-marked-only' with binding 'relsync-demo-writes-marked-only' denied request/;
const MARK = { 'relsync.dev/agent': 'demo' };

interface AuditEvent {
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; namespace?: string; name?: string; subresource?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
}

describe('the admission policy: relsync writes only what carries its mark', () => {
  let tenant: ControlPlane;
  let service: ControlPlane;
  let relsync: RelsyncProcess;
  let dir: string;
  /** When relsync started: its requests are the audit log's from then on (the probes before it are the test's). */
  let started: string;
  let serviceKubeconfig: string;
  let a: ClusterClient;
  let svc: ClusterClient;
  const admin = (args: string[], input?: string) => spawnSync(kubectlPath(), ['--kubeconfig', service.kubeconfigPath, ...args], { encoding: 'utf8', input });
  /** kubectl with relsync's own token, as relsync reaches the service cluster. */
  const asRelsync = (args: string[], input?: string) => spawnSync(kubectlPath(), ['--kubeconfig', serviceKubeconfig, ...args], { encoding: 'utf8', input });
  const ok = (run: ReturnType<typeof admin>, what: string) => assert.equal(run.status, 0, `${what}: ${run.stderr}`);
  const refused = (run: ReturnType<typeof admin>, what: string) => {
    assert.notEqual(run.status, 0, `${what} was let through:\n${run.stdout}`);
    assert.match(run.stderr, POLICY, `${what}: refused by the policy (not by RBAC or anything else)`);
  };
  const configMap = (namespace: string, name: string, labels: Record<string, string> = {}, annotations: Record<string, string> = {}) =>
    JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, labels, annotations }, data: { v: '1' } });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-policy-'));
    [tenant, service] = await Promise.all([startControlPlane('tenant-a'), startControlPlane('service', { audit: true })]);
    await Promise.all([installCrd(tenant.kubeConfig), installCrd(service.kubeConfig)]);
    ok(admin(['apply', '-k', deploy]), 'kubectl apply -k deploy');
    const token = admin(['create', 'token', 'relsync', '-n', 'relsync-system', '--duration=2h']);
    ok(token, 'a token of relsync');
    serviceKubeconfig = join(dir, 'service.yaml');
    const kubeconfig = parse(readFileSync(service.kubeconfigPath, 'utf8')) as { users: Array<{ user: Record<string, string> }> };
    kubeconfig.users[0]!.user = { token: token.stdout.trim() };
    writeFileSync(serviceKubeconfig, JSON.stringify(kubeconfig));
    // The API server loads a new policy in the background: relsync starts once it is in force.
    ok(admin(['create', 'namespace', 'provider']), 'the provider\'s namespace');
    await eventually('the policy in force', async () => {
      const run = asRelsync(['create', '-f', '-'], configMap('provider', `probe-${Date.now()}`));
      return (run.status !== 0 && POLICY.test(run.stderr)) || undefined;
    }, 30_000);

    a = new ClusterClient('tenant-a', tenant.kubeConfig);
    svc = new ClusterClient('service', service.kubeConfig);
    // shop: its copy namespace made by the provider (recording whom it serves, without relsync's
    // mark) and in it, in the related copy's place, the provider's ConfigMap granted to the tenant's.
    const shopCopies = defaultCopyNamespace('tenant-a', 'shop');
    await svc.ensureNamespace(shopCopies, { cluster: 'tenant-a', namespace: 'shop' });
    const grant = '{"agent":"demo","cluster":"tenant-a","group":"","resource":"configmaps","namespace":"shop","name":"cfg"}';
    ok(admin(['create', '-f', '-'], configMap(shopCopies, 'cfg', {}, { 'relsync.dev/adopt': grant })), 'the granted ConfigMap');

    const config = parse(readFileSync(join(deploy, 'config.yaml'), 'utf8')) as Record<string, unknown> & { leaderElection: Record<string, unknown>; resources: Array<{ related: Array<Record<string, unknown>> }> };
    config.platformClusters = [{ name: 'tenant-a', kubeconfig: tenant.kubeconfigPath }];
    config.serviceCluster = { name: 'service', kubeconfig: serviceKubeconfig };
    config.store = { path: join(dir, 'relsync.db') };
    config.leaderElection = { ...config.leaderElection, namespace: 'relsync-system' };
    config.resync = { schedule: '*/10 * * * *', onStartup: true };
    // The related ConfigMaps may adopt what their owner granted (the policy's one exception to marks on a change).
    config.resources[0]!.related.find((r) => r.id === 'config')!.adopt = true;
    started = new Date().toISOString();
    relsync = await startRelsync(writeConfig(dir, config), join(dir, 'relsync.log'));
  });

  after(async () => {
    if (relsync?.child.exitCode === null) await relsync.stop();
    await Promise.all([tenant?.stop(), service?.stop()]);
  });

  it('lets relsync sync: copy namespaces, copies, adoption, the way back, deletion, its key and Lease', async () => {
    for (const ns of ['shop', 'bar']) {
      await a.ensureNamespace(ns);
      // A tenant's forged grant: relsync copies no relsync.dev/ key, so none reaches the service cluster.
      const forged = `{"agent":"demo","cluster":"tenant-a","group":"","resource":"configmaps","namespace":"${ns}","name":"cfg"}`;
      await a.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'cfg', annotations: { 'relsync.dev/adopt': forged } }, data: { v: '1' } } });
      await a.createDatabase(ns, 'orders', { configMapName: 'cfg' });
    }
    const shopCopies = defaultCopyNamespace('tenant-a', 'shop');
    const barCopies = defaultCopyNamespace('tenant-a', 'bar');
    const granted = (await svc.configMap(shopCopies, 'cfg'))!;
    for (const [ns, copyNs] of [['shop', shopCopies], ['bar', barCopies]] as const) {
      const copy = await svc.copyOf(copyNs, 'orders', 60_000);
      const related = await eventually(`the related copy in ${copyNs}`, async () => {
        const cm = await svc.configMap(copyNs, 'cfg');
        return cm?.metadata?.labels?.['relsync.dev/agent'] === 'demo' && cm.data?.v === '1' && cm.metadata.annotations?.['relsync.dev/adopt'] === undefined ? cm : undefined;
      }, 30_000);
      // shop's: the provider's ConfigMap, adopted (its grant used up); bar's: made by relsync, without the tenant's forged grant.
      if (ns === 'shop') assert.equal(related.metadata!.uid, granted.metadata!.uid, 'the granted ConfigMap adopted, not replaced');
      // The operator's Secret for the copy comes back to the tenant.
      await svc.putSecret(copyNs, 'orders-credentials', { password: 'pw' }, undefined, copy);
      await eventually(`the credentials in ${ns}`, () => a.secret(ns, 'orders-credentials'), 30_000);
      await a.putConfigMap(ns, 'cfg', { v: '2' });
      await eventually(`the related change in ${ns}`, async () => (await svc.configMap(copyNs, 'cfg'))?.data?.v === '2' || undefined, 30_000);
    }
    const barNamespace = await svc.core.readNamespace({ name: barCopies });
    assert.equal(barNamespace.metadata?.labels?.['relsync.dev/agent'], 'demo', 'the copy namespace relsync made');
    await a.deleteDatabase('bar', 'orders');
    await eventually('the copy and its related copy deleted', async () => (!(await svc.database(barCopies, 'orders')) && !(await svc.configMap(barCopies, 'cfg'))) || undefined, 60_000);
    await eventually('the primary gone (finalizer removed)', async () => !(await a.database('bar', 'orders')) || undefined, 30_000);
    await eventually('the start sweep', async () => relsync.log().includes('"sweep finished"') || undefined, 60_000);
    // A marker change after everything above: once it arrived, every earlier request is in the audit log.
    await a.putConfigMap('shop', 'cfg', { v: 'marker' });
    await eventually('the marker', async () => (await svc.configMap(shopCopies, 'cfg'))?.data?.v === 'marker' || undefined, 30_000);

    assert.ok(await svc.secret('relsync-system', 'relsync-demo-content-key'), 'the content-hash key, made under the policy');
    const events = readFileSync(service.auditLogPath!, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEvent).filter((e) => e.user.username === RELSYNC_USER && e.requestReceivedTimestamp >= started);
    const writes = events.filter((e) => ['create', 'update', 'patch', 'delete'].includes(e.verb) && (e.responseStatus?.code ?? 0) < 300);
    for (const resource of ['namespaces', 'databases', 'configmaps', 'secrets', 'leases']) assert.ok(writes.some((e) => e.objectRef?.resource === resource), `relsync wrote ${resource}`);
    const denied = events.filter((e) => e.responseStatus?.code === 403).map((e) => `${e.verb} ${e.objectRef?.resource} ${e.objectRef?.namespace ?? ''}/${e.objectRef?.name ?? ''} → ${e.responseStatus?.code}`);
    assert.deepEqual(denied, [], 'requests of relsync\'s refused');
    assert.doesNotMatch(relsync.log(), /forbidden|ValidatingAdmissionPolicy/i);
  });

  it('refuses relsync\'s identity every create, change and delete of an object without its mark', () => {
    // The provider's objects: a ConfigMap, a Secret and a namespace relsync has nothing to do with.
    ok(admin(['create', 'configmap', 'settings', '-n', 'provider', '--from-literal=v=1']), 'the provider\'s ConfigMap');
    ok(admin(['create', 'secret', 'generic', 'db-root', '-n', 'provider', '--from-literal=password=root']), 'the provider\'s Secret');
    // RBAC that a config copying Secrets into the service cluster needs: the policy, not RBAC, must refuse below.
    ok(admin(['create', 'clusterrole', 'relsync-secret-copies', '--verb=create,patch,delete', '--resource=secrets']), 'RBAC for Secret copies');
    ok(admin(['create', 'clusterrolebinding', 'relsync-secret-copies', '--clusterrole=relsync-secret-copies', '--serviceaccount=relsync-system:relsync']), 'its binding');

    refused(asRelsync(['create', '-f', '-'], configMap('provider', 'unmarked')), 'create an unmarked ConfigMap');
    refused(asRelsync(['patch', 'configmap', 'settings', '-n', 'provider', '--type=merge', '-p', '{"data":{"v":"2"}}']), 'patch an unmarked ConfigMap');
    refused(asRelsync(['patch', 'configmap', 'settings', '-n', 'provider', '--type=merge', '-p', JSON.stringify({ metadata: { labels: MARK } })]), 'put the mark on an unmarked ConfigMap');
    refused(asRelsync(['apply', '--server-side', '--field-manager=relsync-demo', '--force-conflicts', '-f', '-'], configMap('provider', 'settings', MARK)), 'apply a marked ConfigMap over an unmarked one');
    refused(asRelsync(['delete', 'configmap', 'settings', '-n', 'provider']), 'delete an unmarked ConfigMap');
    refused(asRelsync(['create', 'secret', 'generic', 'planted', '-n', 'relsync-system', '--from-literal=k=v']), 'create an unmarked Secret in relsync\'s own namespace');
    refused(asRelsync(['patch', 'secret', 'db-root', '-n', 'provider', '--type=merge', '-p', '{"stringData":{"password":"x"}}']), 'patch an unmarked Secret');
    refused(asRelsync(['delete', 'secret', 'db-root', '-n', 'provider']), 'delete an unmarked Secret');
    refused(asRelsync(['patch', 'namespace', 'provider', '--type=merge', '-p', JSON.stringify({ metadata: { annotations: { 'relsync.dev/serves-cluster': 'tenant-a' } } })]), 'patch an unmarked namespace');
    // The content key's exception is its name in relsync's namespace, with its label: nothing else.
    refused(asRelsync(['create', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'relsync-demo-content-key-2', namespace: 'relsync-system', labels: { 'relsync.dev/content-key-for': 'demo' } } })), 'a second content key');

    // A grant for another source (another tenant's) is no grant for this one.
    ok(admin(['create', '-f', '-'], configMap('provider', 'for-b', {}, { 'relsync.dev/adopt': '{"agent":"demo","cluster":"tenant-b","group":"","resource":"configmaps","namespace":"shop","name":"cfg"}' })), 'a grant to tenant-b');
    const marks = { ...MARK };
    const source = { 'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'configmaps', 'relsync.dev/source-namespace': 'shop', 'relsync.dev/source-name': 'cfg' };
    refused(asRelsync(['patch', 'configmap', 'for-b', '-n', 'provider', '--type=merge', '-p', JSON.stringify({ metadata: { labels: marks, annotations: source } })]), 'adopt with a grant to another source');

    // The same writes on marked objects pass: the mark decides, not RBAC.
    ok(asRelsync(['create', '-f', '-'], configMap('provider', 'marked', MARK)), 'create a marked ConfigMap');
    ok(asRelsync(['patch', 'configmap', 'marked', '-n', 'provider', '--type=merge', '-p', '{"data":{"v":"2"}}']), 'patch a marked ConfigMap');
    ok(asRelsync(['delete', 'configmap', 'marked', '-n', 'provider']), 'delete a marked ConfigMap');
    ok(asRelsync(['create', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'marked', namespace: 'provider', labels: MARK }, stringData: { k: 'v' } })), 'create a marked Secret');
    ok(asRelsync(['delete', 'secret', 'marked', '-n', 'provider']), 'delete a marked Secret');
    // The provider's objects are as they were.
    assert.equal(admin(['get', 'configmap', 'settings', '-n', 'provider', '-o', 'jsonpath={.data.v}']).stdout, '1');
    assert.equal(admin(['get', 'secret', 'db-root', '-n', 'provider', '-o', 'jsonpath={.data.password}']).stdout, Buffer.from('root').toString('base64'));
  });
});

// deploy/'s RBAC against what relsync actually calls. relsync runs with the
// ServiceAccount token deploy/ creates, under deploy/'s config and RBAC, on a
// service cluster whose API server writes an audit log; it goes through a
// primary's whole life (an upgrade's unrecorded copy namespace, a new one,
// related copies both ways, updates, deletion, a sweep, leader election).
// Then, from the audit log: no request of relsync's was refused, and every
// permission deploy/ grants was used — a grant nothing uses is a finding.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { kubectlPath, startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { eventually, installCrd } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { ClusterClient, defaultCopyNamespace } from '../harness/tenant.js';

const deploy = fileURLToPath(new URL('../../../deploy', import.meta.url));
const RELSYNC_USER = 'system:serviceaccount:relsync-system:relsync';

interface AuditEvent {
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; apiGroup?: string; namespace?: string; name?: string; subresource?: string };
  responseStatus?: { code?: number };
}

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

describe('deploy RBAC against the calls relsync makes (audit log)', () => {
  let tenant: ControlPlane;
  let service: ControlPlane;
  let relsync: RelsyncProcess;
  let dir: string;
  let events: AuditEvent[] = [];
  const kubectl = (...args: string[]) => spawnSync(kubectlPath(), ['--kubeconfig', service.kubeconfigPath, ...args], { encoding: 'utf8' });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-rbac-'));
    [tenant, service] = await Promise.all([startControlPlane('tenant-a'), startControlPlane('service', { audit: true })]);
    await Promise.all([installCrd(tenant.kubeConfig), installCrd(service.kubeConfig)]);
    const applied = kubectl('apply', '-k', deploy);
    assert.equal(applied.status, 0, applied.stderr);
    const token = kubectl('create', 'token', 'relsync', '-n', 'relsync-system', '--duration=2h');
    assert.equal(token.status, 0, token.stderr);
    // The service kubeconfig relsync gets in the pod: its own ServiceAccount's token.
    const serviceKubeconfig = join(dir, 'service.yaml');
    const admin = parse(readFileSync(service.kubeconfigPath, 'utf8')) as { users: Array<{ user: Record<string, string> }> };
    admin.users[0]!.user = { token: token.stdout.trim() };
    writeFileSync(serviceKubeconfig, JSON.stringify(admin));

    // deploy/'s own config, with this test's clusters and paths.
    const config = parse(readFileSync(join(deploy, 'config.yaml'), 'utf8')) as Record<string, unknown> & { leaderElection: Record<string, unknown> };
    config.platformClusters = [{ name: 'tenant-a', kubeconfig: tenant.kubeconfigPath }];
    config.serviceCluster = { name: 'service', kubeconfig: serviceKubeconfig };
    config.store = { path: join(dir, 'relsync.db') };
    config.leaderElection = { ...config.leaderElection, namespace: 'relsync-system' };
    config.resync = { schedule: '*/10 * * * *', onStartup: true };

    // A copy namespace an older relsync made (labelled, not recorded): relsync records whom it serves.
    const legacy = defaultCopyNamespace('tenant-a', 'shop');
    assert.equal(kubectl('create', 'namespace', legacy).status, 0);
    assert.equal(kubectl('label', 'namespace', legacy, `relsync.dev/agent=${String(config.agentName)}`).status, 0);

    relsync = await startRelsync(writeConfig(dir, config), join(dir, 'relsync.log'));
    const a = new ClusterClient('tenant-a', tenant.kubeConfig);
    const svc = new ClusterClient('service', service.kubeConfig);
    for (const ns of ['shop', 'bar']) {
      await a.ensureNamespace(ns);
      await a.putConfigMap(ns, 'cfg', { v: '1' });
      await a.createDatabase(ns, 'orders', { configMapName: 'cfg' });
    }
    for (const ns of ['shop', 'bar']) {
      const copyNs = defaultCopyNamespace('tenant-a', ns);
      const copy = await svc.copyOf(copyNs, 'orders', 60_000);
      await eventually('the related ConfigMap copy', () => svc.configMap(copyNs, 'cfg'), 30_000);
      // The operator's Secret for the copy comes back to the tenant.
      await svc.putSecret(copyNs, 'orders-credentials', { password: 'pw' }, undefined, copy);
      await eventually('the credentials on the tenant', () => a.secret(ns, 'orders-credentials'), 30_000);
      await a.putConfigMap(ns, 'cfg', { v: '2' });
      await eventually('the related change', async () => (await svc.configMap(copyNs, 'cfg'))?.data?.v === '2' || undefined, 30_000);
      await a.updateDatabase(ns, 'orders', (db) => void (db.spec = { ...db.spec, size: 'large' }));
      await eventually('the primary change', async () => (await svc.database(copyNs, 'orders'))?.spec?.size === 'large' || undefined, 30_000);
    }
    await a.deleteDatabase('bar', 'orders');
    const barCopies = defaultCopyNamespace('tenant-a', 'bar');
    await eventually('the copy and its related copy deleted', async () => (!(await svc.database(barCopies, 'orders')) && !(await svc.configMap(barCopies, 'cfg'))) || undefined, 60_000);
    await eventually('the primary gone (finalizer removed)', async () => !(await a.database('bar', 'orders')) || undefined, 30_000);
    // A sweep by hand, through the running leader's store lock: wait for the start sweep instead.
    await eventually('the start sweep', async () => relsync.log().includes('"sweep finished"') || undefined, 60_000);
    // A marker change after everything above: once it arrived, every earlier request is in the log.
    await a.putConfigMap('shop', 'cfg', { v: 'marker' });
    await eventually('the marker', async () => (await svc.configMap(defaultCopyNamespace('tenant-a', 'shop'), 'cfg'))?.data?.v === 'marker' || undefined, 30_000);
    await relsync.stop();
    events = readFileSync(service.auditLogPath!, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEvent).filter((e) => e.user.username === RELSYNC_USER);
  });

  after(async () => {
    if (relsync?.child.exitCode === null) await relsync.stop();
    await Promise.all([tenant?.stop(), service?.stop()]);
  });

  it('lets relsync do everything it does: no request refused, nothing left unsynced for lack of a permission', () => {
    // The log holds relsync's traffic: the writes this scenario made it do (a count would only
    // measure how few requests relsync needs, which its caches and sweeps keep lowering).
    const made = (verb: string, resource: string) => events.some((e) => e.verb === verb && e.objectRef?.resource === resource && (e.responseStatus?.code ?? 0) < 300);
    for (const [verb, resource] of [['patch', 'databases'], ['patch', 'configmaps'], ['delete', 'databases'], ['delete', 'configmaps'], ['watch', 'secrets']] as const) {
      assert.ok(made(verb, resource), `relsync's ${verb} of ${resource} is in the audit log (${events.length} requests of relsync's in all)`);
    }
    const refused = events.filter((e) => e.responseStatus?.code === 403).map(summary);
    assert.deepEqual(refused, [], 'requests the RBAC refused');
    assert.doesNotMatch(relsync.log(), /forbidden|may not/i);
  });

  it('grants nothing relsync does not use', () => {
    const rules: Rule[] = parseAllDocuments(readFileSync(join(deploy, 'rbac.yaml'), 'utf8'))
      .map((d) => d.toJS() as { kind: string; metadata: { name: string }; rules?: Rule[] })
      .filter((d) => (d.kind === 'ClusterRole' || d.kind === 'Role') && d.metadata.name.startsWith('relsync'))
      .flatMap((d) => d.rules ?? []);
    const unused: string[] = [];
    for (const rule of rules) {
      for (const group of rule.apiGroups) {
        for (const resource of rule.resources) {
          for (const verb of rule.verbs) {
            // An apply that creates is a patch the API server also authorizes as create (answered 201).
            const used = events.some((e) => (e.verb === verb || (verb === 'create' && e.verb === 'patch' && e.responseStatus?.code === 201)) && (e.objectRef?.apiGroup ?? '') === group && e.objectRef?.resource === resource && !e.objectRef.subresource && (!rule.resourceNames || rule.resourceNames.includes(e.objectRef.name ?? '')));
            if (!used) unused.push(`${verb} ${resource}${group ? `.${group}` : ''}${rule.resourceNames ? ` ${rule.resourceNames.join(',')}` : ''}`);
          }
        }
      }
    }
    assert.deepEqual(unused, [], `granted in deploy/rbac.yaml but never called:\n${unused.join('\n')}\ncalls made:\n${[...new Set(events.map(summary))].sort().join('\n')}`);
  });
});

/**
 * Issue #35, point 6: the RBAC of a release before sharding (no list on Leases), restored by a
 * rollback while replicas of a sharded config may still run. Such a leader cannot see shard holders,
 * so it must not lead blind: it holds its Lease, writes nothing, says why on /readyz and in its log,
 * and goes on by itself once list is granted again.
 */
describe('a leader that may not list Leases (the RBAC of a release before sharding)', () => {
  let tenant: ControlPlane;
  let service: ControlPlane;
  let relsync: RelsyncProcess | undefined;
  let dir: string;
  const kubectl = (...args: string[]) => spawnSync(kubectlPath(), ['--kubeconfig', service.kubeconfigPath, ...args], { encoding: 'utf8' });
  const audit = () => readFileSync(service.auditLogPath!, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEvent & { requestReceivedTimestamp: string }).filter((e) => e.user.username === RELSYNC_USER);
  const readyz = async (p: RelsyncProcess) => {
    const res = await fetch(`http://127.0.0.1:${p.httpPort}/readyz`);
    return `${res.status} ${await res.text()}`;
  };
  const role = () => parseAllDocuments(readFileSync(join(deploy, 'rbac.yaml'), 'utf8')).map((d) => d.toJS() as { kind: string; metadata: { name: string }; rules: Rule[] }).find((d) => d.kind === 'Role' && d.metadata.name === 'relsync')!;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-rbac-old-'));
    [tenant, service] = await Promise.all([startControlPlane('tenant-a'), startControlPlane('service', { audit: true })]);
    await Promise.all([installCrd(tenant.kubeConfig), installCrd(service.kubeConfig)]);
    assert.equal(kubectl('apply', '-k', deploy).status, 0);
    // The Role as a release before sharding had it: every rule but list on Leases.
    const old = role();
    old.rules = old.rules.filter((r) => !(r.resources.includes('leases') && r.verbs.includes('list')));
    const applied = spawnSync(kubectlPath(), ['--kubeconfig', service.kubeconfigPath, 'apply', '-n', 'relsync-system', '-f', '-'], { input: JSON.stringify({ apiVersion: 'rbac.authorization.k8s.io/v1', ...old }), encoding: 'utf8' });
    assert.equal(applied.status, 0, applied.stderr);
  });

  after(async () => {
    if (relsync?.child.exitCode === null) await relsync.stop();
    await Promise.all([tenant?.stop(), service?.stop()]);
  });

  it('holds its Lease but writes nothing, says why, and leads once list is granted', async () => {
    const token = kubectl('create', 'token', 'relsync', '-n', 'relsync-system', '--duration=2h');
    assert.equal(token.status, 0, token.stderr);
    const serviceKubeconfig = join(dir, 'service.yaml');
    const admin = parse(readFileSync(service.kubeconfigPath, 'utf8')) as { users: Array<{ user: Record<string, string> }> };
    admin.users[0]!.user = { token: token.stdout.trim() };
    writeFileSync(serviceKubeconfig, JSON.stringify(admin));
    const config = parse(readFileSync(join(deploy, 'config.yaml'), 'utf8')) as Record<string, unknown> & { leaderElection: Record<string, unknown> };
    config.platformClusters = [{ name: 'tenant-a', kubeconfig: tenant.kubeconfigPath }];
    config.serviceCluster = { name: 'service', kubeconfig: serviceKubeconfig };
    config.store = { path: join(dir, 'relsync.db') };
    config.leaderElection = { ...config.leaderElection, namespace: 'relsync-system', retryPeriodSeconds: 1 };
    const a = new ClusterClient('tenant-a', tenant.kubeConfig);
    const svc = new ClusterClient('service', service.kubeConfig);
    await a.ensureNamespace('shop');
    await a.putConfigMap('shop', 'cfg', { v: '1' });
    await a.createDatabase('shop', 'orders', { configMapName: 'cfg' });
    relsync = await startRelsync(writeConfig(dir, config), join(dir, 'relsync.log'));

    await relsync.waitForLog('the error that names the missing grant', /may not list Leases/, 30_000);
    const leaseHolder = (kubectl('get', 'lease', '-n', 'relsync-system', `relsync-${String(config.agentName)}`, '-o', 'jsonpath={.spec.holderIdentity}').stdout);
    assert.ok(leaseHolder.length > 0, 'it holds the leader Lease');
    assert.match(await readyz(relsync), /^503 .*leads, but waits: may not list Leases/s);
    // Provably seen after the primary and its ConfigMap existed: two more refused LISTs of Leases.
    const since = new Date().toISOString();
    await eventually('two more refused LISTs of Leases', async () => audit().filter((e) => e.verb === 'list' && e.objectRef?.resource === 'leases' && e.responseStatus?.code === 403 && e.requestReceivedTimestamp > since).length >= 2 || undefined, 30_000);
    const writes = audit().filter((e) => ['create', 'update', 'patch', 'delete'].includes(e.verb) && e.objectRef?.resource !== 'leases' && (e.responseStatus?.code ?? 0) < 300).map(summary);
    assert.deepEqual(writes, [], 'writes of a leader that cannot see shard holders');
    const copyNs = defaultCopyNamespace('tenant-a', 'shop');
    assert.equal(await svc.database(copyNs, 'orders'), undefined, 'no copy while it waits');

    // The grant comes back: it leads by itself, without a restart.
    assert.equal(kubectl('apply', '-k', deploy).status, 0);
    await svc.copyOf(copyNs, 'orders', 60_000);
    await eventually('the related copy', () => svc.configMap(copyNs, 'cfg'), 30_000);
    await eventually('ready', async () => (await readyz(relsync!)).startsWith('200') || undefined, 30_000);
  });
});

function summary(e: AuditEvent): string {
  const o = e.objectRef ?? {};
  return `${e.verb} ${o.resource ?? '?'}${o.apiGroup ? `.${o.apiGroup}` : ''}${o.subresource ? `/${o.subresource}` : ''}${o.namespace ? ` -n ${o.namespace}` : ''}${o.name ? ` ${o.name}` : ''} → ${e.responseStatus?.code ?? '?'}`;
}

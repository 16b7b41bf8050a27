// deploy/ is valid: `kubectl apply -k deploy --dry-run=server` against a real
// API server accepts every object, and once applied the ServiceAccount may do
// exactly what relsync does in the service cluster (and not more).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { ShardLeases } from '../../src/controller/shard-leases.js';
import { systemClock } from '../../src/util/clock.js';
import { after, before, describe, it } from 'node:test';
import { kubectlPath, startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { installCrd } from '../harness/kube.js';

const deploy = fileURLToPath(new URL('../../../deploy', import.meta.url));

describe('deploy manifests', () => {
  let plane: ControlPlane;
  const kubectl = (...args: string[]) => spawnSync(kubectlPath(), ['--kubeconfig', plane.kubeconfigPath, ...args], { encoding: 'utf8' });

  before(async () => {
    plane = await startControlPlane('deploy');
    await installCrd(plane.kubeConfig);
  });
  after(async () => {
    await plane?.stop();
  });

  it('are accepted by a real API server (server-side dry run)', () => {
    // A dry run creates nothing, so the namespace the other objects go to must exist.
    assert.equal(kubectl('create', 'namespace', 'relsync-system').status, 0);
    const out = kubectl('apply', '-k', deploy, '--dry-run=server');
    assert.equal(out.status, 0, out.stderr);
    for (const kind of ['namespace/relsync-system', 'serviceaccount/relsync', 'serviceaccount/database-operator', 'secret/relsync-token', 'clusterrole.rbac.authorization.k8s.io/relsync', 'role.rbac.authorization.k8s.io/relsync', 'configmap/relsync-config-', 'secret/relsync-platform-kubeconfigs', 'deployment.apps/database-operator']) {
      assert.ok(out.stdout.includes(kind), `${kind} in:\n${out.stdout}`);
    }
  });

  it('grant the verbs relsync uses on the types it is configured for, and no others', () => {
    // Apply for real (the Deployment stays pending: no scheduler or kubelet runs here).
    const applied = kubectl('apply', '-k', deploy);
    assert.equal(applied.status, 0, applied.stderr);
    const sa = 'system:serviceaccount:relsync-system:relsync';
    const can = (verb: string, resource: string, namespace = 'tenant-a-ns') => kubectl('auth', 'can-i', verb, resource, '--as', sa, '-n', namespace).stdout.trim();
    for (const verb of ['get', 'list', 'watch', 'create', 'patch', 'delete']) {
      assert.equal(can(verb, 'databases.demo.relsync.dev'), 'yes', `${verb} databases`);
      assert.equal(can(verb, 'configmaps'), 'yes', `${verb} configmaps`);
      // Secrets are service-origin sources in config.yaml: read, never written in a copy namespace.
      assert.equal(can(verb, 'secrets'), ['get', 'list', 'watch'].includes(verb) ? 'yes' : 'no', `${verb} secrets`);
    }
    assert.equal(can('create', 'secrets', 'relsync-system'), 'yes', 'the content-hash key, in its own namespace');
    assert.equal(can('create', 'namespaces'), 'yes');
    assert.equal(can('patch', 'namespaces'), 'yes', 'to record whom a copy namespace serves');
    assert.equal(can('update', 'leases.coordination.k8s.io/relsync-demo', 'relsync-system'), 'yes');
    assert.equal(can('update', 'leases.coordination.k8s.io/another-lease', 'relsync-system'), 'no', 'only its own Lease');
    assert.equal(can('create', 'leases.coordination.k8s.io', 'relsync-system'), 'yes');
    assert.equal(can('update', 'leases.coordination.k8s.io', 'kube-system'), 'no', 'leases only in its own namespace');
    assert.equal(can('delete', 'namespaces'), 'no');
    assert.equal(can('create', 'pods'), 'no');
    assert.equal(can('patch', 'secrets'), 'no', 'relsync never patches');
  });

  it('give the operator container its own identity, and relsync its token read-only', () => {
    const deployment = JSON.parse(kubectl('get', 'deployment', 'database-operator', '-n', 'relsync-system', '-o', 'json').stdout) as {
      spec: { template: { spec: { serviceAccountName: string; containers: Array<{ name: string; volumeMounts?: Array<{ name: string; readOnly?: boolean }> }>; volumes: Array<{ name: string; secret?: { defaultMode?: number } }> } } };
    };
    const pod = deployment.spec.template.spec;
    assert.equal(pod.serviceAccountName, 'database-operator', 'the pod\'s identity is the operator\'s');
    const operator = pod.containers.find((c) => c.name === 'operator')!;
    assert.ok(!(operator.volumeMounts ?? []).some((m) => m.name === 'relsync-token' || m.name === 'kubeconfigs'), 'the operator mounts none of relsync\'s credentials');
    for (const name of ['kubeconfigs', 'relsync-token']) assert.equal(pod.volumes.find((v) => v.name === name)?.secret?.defaultMode, 0o400, `${name} mode 0400`);
    const relsync = pod.containers.find((c) => c.name === 'relsync')!;
    assert.ok(relsync.volumeMounts!.filter((m) => m.name !== 'store' && m.name !== 'tmp').every((m) => m.readOnly), 'relsync mounts its config and credentials read-only');
    const podToken = relsync.volumeMounts!.find((m) => (m as { mountPath?: string }).mountPath === '/var/run/secrets/kubernetes.io/serviceaccount');
    assert.equal(pod.volumes.find((v) => v.name === podToken?.name && 'emptyDir' in v) !== undefined, true, 'relsync\'s container does not get the pod\'s (the operator\'s) token');
    const operatorCan = kubectl('auth', 'can-i', 'create', 'namespaces', '--as', 'system:serviceaccount:relsync-system:database-operator').stdout.trim();
    assert.equal(operatorCan, 'no', 'the operator has none of relsync\'s permissions');
  });

  it('run three replicas over six shards with deploy/sharded, each Lease granted by name', () => {
    // An overlay of the user's own, as the component's comment shows (a component inside deploy/ cannot be an overlay of it).
    const overlay = mkdtempSync(join(tmpdir(), 'relsync-deploy-sharded-'));
    writeFileSync(join(overlay, 'kustomization.yaml'), `resources: [${relative(overlay, deploy)}]\ncomponents: [${relative(overlay, join(deploy, 'sharded'))}]\n`);
    const applied = kubectl('apply', '-k', overlay);
    assert.equal(applied.status, 0, applied.stderr);
    const deployment = JSON.parse(kubectl('get', 'deployment', 'database-operator', '-n', 'relsync-system', '-o', 'json').stdout) as { spec: { replicas: number } };
    assert.equal(deployment.spec.replicas, 3);
    // The config is deploy/config.yaml with sharding, nothing else: the two cannot drift apart.
    const base = parse(readFileSync(join(deploy, 'config.yaml'), 'utf8')) as Record<string, unknown>;
    const sharded = parse(readFileSync(join(deploy, 'sharded', 'config.yaml'), 'utf8')) as Record<string, unknown>;
    assert.deepEqual(sharded.sharding, { shards: 6 });
    delete sharded.sharding;
    assert.deepEqual(sharded, base);
    const sa = 'system:serviceaccount:relsync-system:relsync';
    const can = (verb: string, resource: string) => kubectl('auth', 'can-i', verb, resource, '--as', sa, '-n', 'relsync-system').stdout.trim();
    // Every name relsync gives its Leases, from the code that names them.
    const leases = new ShardLeases({ client: undefined as never, namespace: 'relsync-system', base: 'relsync-demo', identity: 'x', fingerprint: 'f', leaseDurationMs: 15_000, clock: systemClock });
    for (let k = 0; k < 6; k++) {
      for (const name of [leases.shardName(k), leases.memberName(k)]) {
        assert.equal(can('update', `leases.coordination.k8s.io/${name}`), 'yes', name);
        assert.equal(can('get', `leases.coordination.k8s.io/${name}`), 'yes', name);
      }
    }
    assert.equal(can('update', `leases.coordination.k8s.io/${leases.shardName(6)}`), 'no', 'no shard beyond the sixth');
    assert.equal(can('update', 'leases.coordination.k8s.io/another-lease'), 'no', 'only its own Leases');
    assert.equal(can('list', 'leases.coordination.k8s.io'), 'yes', 'to see the set in one request');
    assert.equal(can('delete', 'leases.coordination.k8s.io'), 'no');
  });
});

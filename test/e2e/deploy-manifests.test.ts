// deploy/ is valid: `kubectl apply -k deploy --dry-run=server` against a real
// API server accepts every object, and once applied the ServiceAccount may do
// exactly what relsync does in the service cluster (and not more), the
// admission policy is bound to it, each replica keeps its store on a
// PersistentVolumeClaim of its own, deploy/standalone runs relsync alone
// under its own pod identity with a projected token, and the NetworkPolicy
// admits relsync's port from Prometheus only.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { ShardLeases } from '../../src/controller/shard-leases.js';
import { systemClock } from '../../src/util/clock.js';
import { after, before, describe, it } from 'node:test';
import { kubectlPath, startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { installCrd } from '../harness/kube.js';
import { admits, type NetworkPolicy, type PodRef } from '../harness/network-policy.js';

const deploy = fileURLToPath(new URL('../../../deploy', import.meta.url));

interface Volume {
  name: string;
  secret?: { defaultMode?: number };
  projected?: unknown;
  emptyDir?: { sizeLimit?: string };
  persistentVolumeClaim?: unknown;
}
interface Container {
  name: string;
  ports?: Array<{ name?: string; containerPort: number }>;
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
interface StatefulSet {
  spec: {
    replicas: number;
    serviceName?: string;
    podManagementPolicy?: string;
    updateStrategy?: { type?: string };
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: { serviceAccountName: string; containers: Container[]; volumes: Volume[] } };
    volumeClaimTemplates?: Array<{ metadata: { name: string }; spec: { accessModes?: string[]; storageClassName?: string; resources?: { requests?: Record<string, string> } } }>;
  };
}

describe('deploy manifests', () => {
  let plane: ControlPlane;
  const kubectl = (...args: string[]) => spawnSync(kubectlPath(), ['--kubeconfig', plane.kubeconfigPath, ...args], { encoding: 'utf8' });
  const statefulSet = () => {
    const out = kubectl('get', 'statefulset', 'database-operator', '-n', 'relsync-system', '-o', 'json');
    assert.equal(out.status, 0, out.stderr);
    return JSON.parse(out.stdout) as StatefulSet;
  };

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
    for (const kind of ['namespace/relsync-system', 'serviceaccount/relsync', 'serviceaccount/database-operator', 'secret/relsync-token', 'clusterrole.rbac.authorization.k8s.io/relsync', 'role.rbac.authorization.k8s.io/relsync', 'configmap/relsync-config-', 'secret/relsync-platform-kubeconfigs', 'statefulset.apps/database-operator', 'service/database-operator-headless', 'validatingadmissionpolicy.admissionregistration.k8s.io/relsync-demo-writes-marked-only', 'validatingadmissionpolicybinding.admissionregistration.k8s.io/relsync-demo-writes-marked-only', 'networkpolicy.networking.k8s.io/relsync-http']) {
      assert.ok(out.stdout.includes(kind), `${kind} in:\n${out.stdout}`);
    }
  });

  it('grant the verbs relsync uses on the types it is configured for, and no others', () => {
    // Apply for real (the StatefulSet gets no pods: no controller, scheduler or kubelet runs here).
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
    const pod = statefulSet().spec.template.spec;
    assert.equal(pod.serviceAccountName, 'database-operator', 'the pod\'s identity is the operator\'s');
    const operator = pod.containers.find((c) => c.name === 'operator')!;
    assert.ok(!(operator.volumeMounts ?? []).some((m) => m.name === 'relsync-token' || m.name === 'kubeconfigs'), 'the operator mounts none of relsync\'s credentials');
    for (const name of ['kubeconfigs', 'relsync-token']) assert.equal(pod.volumes.find((v) => v.name === name)?.secret?.defaultMode, 0o400, `${name} mode 0400`);
    const relsync = pod.containers.find((c) => c.name === 'relsync')!;
    assert.ok(relsync.volumeMounts!.filter((m) => m.name !== 'store' && m.name !== 'tmp').every((m) => m.readOnly), 'relsync mounts its config and credentials read-only');
    const podToken = relsync.volumeMounts!.find((m) => m.mountPath === '/var/run/secrets/kubernetes.io/serviceaccount');
    assert.equal(pod.volumes.find((v) => v.name === podToken?.name && 'emptyDir' in v) !== undefined, true, 'relsync\'s container does not get the pod\'s (the operator\'s) token');
    const operatorCan = kubectl('auth', 'can-i', 'create', 'namespaces', '--as', 'system:serviceaccount:relsync-system:database-operator').stdout.trim();
    assert.equal(operatorCan, 'no', 'the operator has none of relsync\'s permissions');
  });

  it('keep each replica\'s store on a PersistentVolumeClaim of its own, and give every emptyDir a size limit', () => {
    // As applied (the previous tests applied deploy/): what the API server stored, defaults included.
    const workload = statefulSet();
    const claims = workload.spec.volumeClaimTemplates ?? [];
    assert.deepEqual(claims.map((c) => c.metadata.name), ['store'], 'one claim template, the store');
    const store = claims[0]!.spec;
    assert.deepEqual(store.accessModes, ['ReadWriteOnce']);
    assert.equal(store.resources?.requests?.storage, '1Gi');
    assert.equal(store.storageClassName, undefined, 'the cluster\'s default storage class');
    const pod = workload.spec.template.spec;
    const relsync = pod.containers.find((c) => c.name === 'relsync')!;
    assert.deepEqual(relsync.volumeMounts!.filter((m) => m.mountPath === '/var/lib/relsync').map((m) => m.name), ['store'], 'the claim is mounted at /var/lib/relsync');
    assert.equal(pod.volumes.find((v) => v.name === 'store'), undefined, 'no pod volume in the claim\'s place');
    // The config's store (and the shards' stores beside it) is on that volume.
    for (const file of ['config.yaml', join('sharded', 'config.yaml')]) {
      const config = parse(readFileSync(join(deploy, file), 'utf8')) as { store: { path: string } };
      assert.ok(config.store.path.startsWith('/var/lib/relsync/'), `${file}: store.path ${config.store.path} on the claim`);
    }
    const emptyDirs = pod.volumes.filter((v) => v.emptyDir !== undefined);
    assert.deepEqual(emptyDirs.map((v) => v.name).sort(), ['no-pod-token', 'tmp']);
    for (const v of emptyDirs) assert.ok(v.emptyDir!.sizeLimit, `emptyDir ${v.name} has a sizeLimit`);
    assert.equal(workload.spec.podManagementPolicy, 'Parallel');
    assert.equal(workload.spec.updateStrategy?.type, 'RollingUpdate');
    // The governing Service exists, is headless and selects the pods.
    const service = JSON.parse(kubectl('get', 'service', workload.spec.serviceName!, '-n', 'relsync-system', '-o', 'json').stdout) as { spec: { clusterIP: string; selector: Record<string, string> } };
    assert.equal(service.spec.clusterIP, 'None');
    assert.deepEqual(service.spec.selector, workload.spec.selector.matchLabels);
    for (const [k, v] of Object.entries(workload.spec.selector.matchLabels)) assert.equal(workload.spec.template.metadata.labels[k], v);
  });

  it('bind the admission policy to relsync\'s ServiceAccount and config.yaml\'s agent name', () => {
    // The policy writes both out (CEL cannot read the config): they must be the ones deploy/ runs relsync with.
    const policy = parse(readFileSync(join(deploy, 'admission-policy.yaml'), 'utf8').split(/^---$/m)[0]!) as { spec: { matchConditions: Array<{ expression: string }>; variables: Array<{ name: string; expression: string }> } };
    const config = parse(readFileSync(join(deploy, 'config.yaml'), 'utf8')) as { agentName: string };
    const kustomization = parse(readFileSync(join(deploy, 'kustomization.yaml'), 'utf8')) as { namespace: string; resources: string[] };
    const variable = (name: string) => policy.spec.variables.find((v) => v.name === name)?.expression;
    assert.equal(variable('agent'), `'${config.agentName}'`);
    assert.equal(variable('home'), `'${kustomization.namespace}'`);
    assert.deepEqual(policy.spec.matchConditions.map((c) => c.expression), [`request.userInfo.username == 'system:serviceaccount:${kustomization.namespace}:relsync'`]);
    assert.ok(kustomization.resources.includes('admission-policy.yaml'), 'in the base');
    const stored = kubectl('get', 'validatingadmissionpolicybinding', 'relsync-demo-writes-marked-only', '-o', 'jsonpath={.spec.policyName} {.spec.validationActions}');
    assert.equal(stored.stdout, 'relsync-demo-writes-marked-only ["Deny"]', stored.stderr);
  });

  it('run relsync alone in its own namespace with deploy/standalone: its own pod identity, a projected token, no token Secret', () => {
    const overlay = mkdtempSync(join(tmpdir(), 'relsync-deploy-standalone-'));
    writeFileSync(join(overlay, 'kustomization.yaml'), `resources: [${relative(overlay, deploy)}]\ncomponents: [${relative(overlay, join(deploy, 'standalone'))}]\n`);
    const built = kubectl('kustomize', overlay);
    assert.equal(built.status, 0, built.stderr);
    const objects = parseAllDocuments(built.stdout).map((d) => d.toJS() as { kind: string; metadata: { name: string; namespace?: string }; spec?: unknown });
    const names = objects.map((o) => `${o.kind}/${o.metadata.name}`);
    for (const gone of ['StatefulSet/database-operator', 'Service/database-operator-headless', 'ServiceAccount/database-operator', 'Secret/relsync-token']) assert.ok(!names.includes(gone), `${gone} is not installed`);
    for (const o of objects.filter((o) => !['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'].includes(o.kind))) assert.equal(o.metadata.namespace, 'relsync-system', `${o.kind}/${o.metadata.name} in relsync's namespace`);
    const workload = objects.find((o) => o.kind === 'StatefulSet') as unknown as StatefulSet & { metadata: { name: string } };
    assert.equal(workload.metadata.name, 'relsync');
    const pod = workload.spec.template.spec as StatefulSet['spec']['template']['spec'] & { automountServiceAccountToken?: boolean };
    assert.equal(pod.serviceAccountName, 'relsync', 'the pod\'s identity is relsync\'s');
    assert.equal(pod.automountServiceAccountToken, false);
    assert.deepEqual(pod.containers.map((c) => c.name), ['relsync']);
    const token = pod.volumes.find((v) => v.name === 'relsync-token') as Volume & { projected?: { defaultMode?: number; sources: Array<{ serviceAccountToken?: { path: string; expirationSeconds?: number; audience?: string }; configMap?: { name: string } }> } };
    assert.equal(token.secret, undefined, 'no token Secret');
    assert.equal(token.projected?.defaultMode, 0o400);
    const projected = token.projected!.sources.find((s) => s.serviceAccountToken)!.serviceAccountToken!;
    assert.equal(projected.path, 'token', 'where service-kubeconfig.yaml reads it');
    assert.ok(projected.expirationSeconds! >= 600 && projected.expirationSeconds! <= 3600, `expires (${projected.expirationSeconds} s)`);
    assert.equal(token.projected!.sources.find((s) => s.configMap)?.configMap?.name, 'kube-root-ca.crt', 'the CA service-kubeconfig.yaml reads');
    for (const v of pod.volumes.filter((v) => v.emptyDir !== undefined)) assert.ok(v.emptyDir!.sizeLimit, `emptyDir ${v.name} has a sizeLimit`);
    // relsync's container is the base's (the operator's pod token hidden there is not needed here).
    const base = (parse(readFileSync(join(deploy, 'statefulset.yaml'), 'utf8')) as StatefulSet).spec;
    const baseRelsync = base.template.spec.containers.find((c) => c.name === 'relsync')!;
    assert.deepEqual(pod.containers[0], { ...baseRelsync, volumeMounts: baseRelsync.volumeMounts!.filter((m) => m.name !== 'no-pod-token') });
    assert.deepEqual(workload.spec.volumeClaimTemplates, base.volumeClaimTemplates);
    const metrics = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'relsync-metrics') as unknown as { spec: { selector: Record<string, string> } };
    assert.deepEqual(metrics.spec.selector, workload.spec.selector.matchLabels, '/metrics of relsync\'s pods');
    // The NetworkPolicy selects relsync's pods: every port of them closed to a stranger, relsync's open to Prometheus.
    const policy = objects.find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'relsync-http') as unknown as NetworkPolicy;
    const relsyncPod = { namespace: 'relsync-system', labels: workload.spec.template.metadata.labels as Record<string, string>, namedPorts: { 'relsync-http': 8080 } };
    assert.equal(admits(policy, relsyncPod, { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' } }, 8080), true, 'Prometheus reaches relsync\'s port');
    const openToStranger: number[] = [];
    for (let port = 1; port <= 65535; port++) if (admits(policy, relsyncPod, { namespace: 'tenant-x', labels: {} }, port) !== false) openToStranger.push(port);
    assert.deepEqual(openToStranger, [], 'no port of relsync\'s pods is open to a stranger');
    // Accepted by the API server, and with deploy/sharded too (its replicas on relsync's StatefulSet).
    const dry = kubectl('apply', '-k', overlay, '--dry-run=server');
    assert.equal(dry.status, 0, dry.stderr);
    writeFileSync(join(overlay, 'kustomization.yaml'), `resources: [${relative(overlay, deploy)}]\ncomponents: [${relative(overlay, join(deploy, 'standalone'))}, ${relative(overlay, join(deploy, 'sharded'))}]\n`);
    const sharded = kubectl('kustomize', overlay);
    assert.equal(sharded.status, 0, sharded.stderr);
    const shardedWorkload = parseAllDocuments(sharded.stdout).map((d) => d.toJS() as { kind: string; spec: { replicas: number } }).find((o) => o.kind === 'StatefulSet')!;
    assert.equal(shardedWorkload.spec.replicas, 3);
  });

  it('run three replicas over six shards with deploy/sharded, each Lease granted by name', () => {
    // An overlay of the user's own, as the component's comment shows (a component inside deploy/ cannot be an overlay of it).
    const overlay = mkdtempSync(join(tmpdir(), 'relsync-deploy-sharded-'));
    writeFileSync(join(overlay, 'kustomization.yaml'), `resources: [${relative(overlay, deploy)}]\ncomponents: [${relative(overlay, join(deploy, 'sharded'))}]\n`);
    const applied = kubectl('apply', '-k', overlay);
    assert.equal(applied.status, 0, applied.stderr);
    const workload = statefulSet();
    assert.equal(workload.spec.replicas, 3);
    assert.deepEqual(workload.spec.volumeClaimTemplates?.map((c) => c.metadata.name), ['store'], 'each replica still with a claim of its own');
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

  it('admit relsync\'s port from Prometheus only, and leave the operator\'s other ports as they were (the NetworkPolicy as stored)', () => {
    const applied = kubectl('apply', '-k', deploy);
    assert.equal(applied.status, 0, applied.stderr);
    const got = kubectl('get', 'networkpolicy', 'relsync-http', '-n', 'relsync-system', '-o', 'json');
    assert.equal(got.status, 0, got.stderr);
    const policy = JSON.parse(got.stdout) as NetworkPolicy;
    const template = statefulSet().spec.template;
    const namedPorts = Object.fromEntries(template.spec.containers.flatMap((c) => (c.ports ?? []).filter((p) => p.name).map((p) => [p.name!, p.containerPort])));
    assert.equal(namedPorts['relsync-http'], 8080);
    const pod = { namespace: 'relsync-system', labels: template.metadata.labels, namedPorts };
    const prometheus: PodRef = { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus', 'app.kubernetes.io/instance': 'k8s' } };
    assert.equal(admits(policy, pod, prometheus, 8080), true, 'Prometheus reaches relsync\'s port (the policy selects the pod)');
    const others: Array<[string, PodRef]> = [
      ['a pod labelled prometheus in another namespace', { namespace: 'tenant-a-ns', labels: { 'app.kubernetes.io/name': 'prometheus' } }],
      ['another pod of the monitoring namespace', { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'grafana' } }],
      ['a pod beside relsync', { namespace: 'relsync-system', labels: { app: 'x' } }],
    ];
    for (const [what, peer] of others) {
      assert.equal(admits(policy, pod, peer, 8080), false, what);
      assert.equal(admits(policy, pod, peer, 9443), true, `${what}: the operator's webhook port stays open`);
    }
    // Every TCP port but relsync's admits anyone (the operator's, as without a policy); UDP too.
    const stranger = others[0]![1];
    const closed = [];
    for (let port = 1; port <= 65535; port++) if (!admits(policy, pod, stranger, port)) closed.push(port);
    assert.deepEqual(closed, [8080]);
    assert.equal(admits(policy, pod, stranger, 53, 'UDP'), true);
  });
});

// deploy/helm/relsync: linted and rendered by a real helm (built from its Go module), its output
// accepted by a real API server (server-side dry run), in both modes; once applied, relsync's
// ServiceAccount may do what the kustomize base (deploy/) lets it do, and the two render the same
// RBAC rules and keep the store alike: on a PersistentVolumeClaim per replica (a StatefulSet), or,
// with persistence.enabled=false, in an emptyDir of limited size (a Deployment). Its NetworkPolicy
// is the base's, and what it admits follows the values; with metrics.tls the port serves TLS.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { kubectlPath, startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { helmPath } from '../harness/helm.js';
import { installCrd } from '../harness/kube.js';
import { admits, type NetworkPolicy, type PodRef } from '../harness/network-policy.js';

const chart = fileURLToPath(new URL('../../../deploy/helm/relsync', import.meta.url));
const deploy = fileURLToPath(new URL('../../../deploy', import.meta.url));

interface Volume {
  name: string;
  emptyDir?: { sizeLimit?: string };
}
interface ClaimTemplate {
  metadata: { name: string; annotations?: Record<string, string> };
  spec: { accessModes?: string[]; storageClassName?: string; resources?: { requests?: Record<string, string> } };
}
interface Manifest {
  kind: string;
  metadata: { name: string };
  rules?: unknown[];
  data?: Record<string, string>;
  spec?: {
    serviceName?: string;
    podManagementPolicy?: string;
    updateStrategy?: { type?: string };
    clusterIP?: string;
    selector?: Record<string, unknown>;
    template: {
      metadata: { labels: Record<string, string> };
      spec: {
        serviceAccountName?: string;
        containers: Array<{
          name: string;
          args?: string[];
          ports?: Array<{ name?: string; containerPort: number }>;
          volumeMounts?: Array<{ name: string; mountPath: string; subPath?: string; readOnly?: boolean }>;
          livenessProbe?: { httpGet?: { scheme?: string } };
          readinessProbe?: { httpGet?: { scheme?: string } };
        }>;
        volumes: Array<Volume & { secret?: { secretName?: string; defaultMode?: number } }>;
      };
    };
    volumeClaimTemplates?: ClaimTemplate[];
  };
}
const docs = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as Manifest | null).filter((d): d is Manifest => d !== null);
const workloadOf = (all: Manifest[]) => {
  const found = all.filter((d) => d.kind === 'StatefulSet' || d.kind === 'Deployment');
  assert.equal(found.length, 1, `one workload, got ${found.map((d) => d.kind).join(', ')}`);
  return found[0]!;
};

describe('the Helm chart', () => {
  let plane: ControlPlane;
  const helm = (...args: string[]) => spawnSync(helmPath(), args, { encoding: 'utf8' });
  const kubectl = (args: string[], input?: string) => spawnSync(kubectlPath(), ['--kubeconfig', plane.kubeconfigPath, ...args], { encoding: 'utf8', input });
  const render = (...set: string[]) => {
    const out = helm('template', 'relsync', chart, '--namespace', 'relsync-system', ...set.flatMap((s) => ['--set', s]));
    assert.equal(out.status, 0, out.stderr);
    return out.stdout;
  };

  before(async () => {
    plane = await startControlPlane('helm');
    await installCrd(plane.kubeConfig);
    assert.equal(kubectl(['create', 'namespace', 'relsync-system']).status, 0);
  });
  after(async () => {
    await plane?.stop();
  });

  it('lints clean in both modes, and refuses a mode it does not know', () => {
    for (const mode of ['sidecar', 'standalone']) {
      const out = helm('lint', '--strict', chart, '--set', `mode=${mode}`);
      assert.equal(out.status, 0, `${mode}: ${out.stdout}${out.stderr}`);
    }
    const bad = helm('template', 'relsync', chart, '--set', 'mode=daemonset');
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /mode must be sidecar or standalone, got "daemonset"/);
  });

  it('renders what a real API server accepts, in both modes, with and without persistence (server-side dry run)', () => {
    for (const mode of ['sidecar', 'standalone']) {
      const name = mode === 'sidecar' ? 'database-operator' : 'relsync';
      for (const persistent of [true, false]) {
        const out = kubectl(['apply', '--dry-run=server', '-n', 'relsync-system', '-f', '-'], render(`mode=${mode}`, `persistence.enabled=${persistent}`));
        assert.equal(out.status, 0, `${mode}, persistence ${persistent}: ${out.stderr}`);
        const workload = persistent ? [`statefulset.apps/${name}`, `service/${name}-headless`] : [`deployment.apps/${name}`];
        // The long-lived token Secret only where the pod's identity is the operator's (sidecar).
        const token = mode === 'sidecar' ? ['secret/relsync-token'] : [];
        for (const kind of ['networkpolicy.networking.k8s.io/relsync-http', 'serviceaccount/relsync', ...token, 'clusterrole.rbac.authorization.k8s.io/relsync-relsync-system', 'role.rbac.authorization.k8s.io/relsync', 'configmap/relsync-config', 'secret/relsync-platform-kubeconfigs', 'service/relsync-metrics', 'validatingadmissionpolicy.admissionregistration.k8s.io/relsync-relsync-system-writes-marked-only', 'validatingadmissionpolicybinding.admissionregistration.k8s.io/relsync-relsync-system-writes-marked-only', ...workload]) {
          assert.ok(out.stdout.includes(kind), `${mode}, persistence ${persistent}: ${kind} in:\n${out.stdout}`);
        }
        if (mode === 'standalone') assert.doesNotMatch(out.stdout, /secret\/relsync-token/);
        if (!persistent) assert.doesNotMatch(out.stdout, /statefulset|headless/);
      }
    }
  });

  it('keeps the store on a PersistentVolumeClaim per replica by default, as the kustomize base does', () => {
    for (const mode of ['sidecar', 'standalone']) {
      const all = docs(render(`mode=${mode}`));
      const workload = workloadOf(all);
      assert.equal(workload.kind, 'StatefulSet', mode);
      const spec = workload.spec!;
      assert.deepEqual(spec.volumeClaimTemplates!.map((c) => c.metadata.name), ['store'], mode);
      const claim = spec.volumeClaimTemplates![0]!;
      assert.deepEqual(claim.spec.accessModes, ['ReadWriteOnce'], mode);
      assert.equal(claim.spec.resources?.requests?.storage, '1Gi', mode);
      assert.equal(claim.spec.storageClassName, undefined, `${mode}: the cluster's default storage class`);
      const pod = spec.template.spec;
      const relsync = pod.containers.find((c) => c.name === 'relsync')!;
      assert.deepEqual(relsync.volumeMounts!.filter((m) => m.mountPath === '/var/lib/relsync').map((m) => m.name), ['store'], `${mode}: the claim at /var/lib/relsync`);
      assert.equal(pod.volumes.find((v) => v.name === 'store'), undefined, `${mode}: no pod volume in the claim's place`);
      for (const v of pod.volumes.filter((v) => v.emptyDir !== undefined)) assert.ok(v.emptyDir!.sizeLimit, `${mode}: emptyDir ${v.name} has a sizeLimit`);
      assert.equal(spec.podManagementPolicy, 'Parallel');
      assert.equal(spec.updateStrategy?.type, 'RollingUpdate');
      const headless = all.find((d) => d.kind === 'Service' && d.metadata.name === spec.serviceName)!;
      assert.ok(headless, `${mode}: the governing Service ${spec.serviceName}`);
      assert.equal(headless.spec!.clusterIP, 'None');
      for (const [k, v] of Object.entries(headless.spec!.selector!)) assert.equal(spec.template.metadata.labels[k], v, `${mode}: the headless Service selects the pods`);
    }
    // The chart's sidecar and deploy/statefulset.yaml keep the store and their other volumes alike.
    const base = docs(readFileSync(`${deploy}/statefulset.yaml`, 'utf8'))[0]!.spec!;
    const chartSpec = workloadOf(docs(render())).spec!;
    assert.deepEqual(chartSpec.volumeClaimTemplates!.map((c) => c.spec), base.volumeClaimTemplates!.map((c) => c.spec));
    assert.deepEqual(chartSpec.template.spec.volumes, base.template.spec.volumes);
    assert.equal(chartSpec.podManagementPolicy, base.podManagementPolicy);
    assert.deepEqual(chartSpec.updateStrategy, base.updateStrategy);
    // What a provider sets reaches the claim; applied for real, the API server keeps it.
    const custom = render('persistence.size=5Gi', 'persistence.storageClassName=local-ssd', 'persistence.accessModes={ReadWriteOncePod}', 'persistence.annotations.backup\\.example\\.com/skip=true');
    const claim = workloadOf(docs(custom)).spec!.volumeClaimTemplates![0]!;
    assert.deepEqual(claim.spec, { accessModes: ['ReadWriteOncePod'], storageClassName: 'local-ssd', resources: { requests: { storage: '5Gi' } } });
    assert.deepEqual(claim.metadata.annotations, { 'backup.example.com/skip': 'true' });
    const dry = kubectl(['apply', '--dry-run=server', '-f', '-'], custom);
    assert.equal(dry.status, 0, dry.stderr);
    const applied = kubectl(['apply', '-f', '-'], render());
    assert.equal(applied.status, 0, applied.stderr);
    const stored = kubectl(['get', 'statefulset', 'database-operator', '-n', 'relsync-system', '-o', 'json']);
    assert.equal(stored.status, 0, stored.stderr);
    const storedSpec = (JSON.parse(stored.stdout) as Manifest).spec!;
    assert.deepEqual(storedSpec.volumeClaimTemplates!.map((c) => [c.metadata.name, c.spec.accessModes, c.spec.resources?.requests?.storage, c.spec.storageClassName]), [['store', ['ReadWriteOnce'], '1Gi', undefined]]);
    for (const v of storedSpec.template.spec.volumes.filter((v) => v.emptyDir !== undefined)) assert.ok(v.emptyDir!.sizeLimit, `applied: emptyDir ${v.name} has a sizeLimit`);
  });

  it('renders a Deployment with the store in a size-limited emptyDir with persistence.enabled=false', () => {
    for (const mode of ['sidecar', 'standalone']) {
      for (const [set, limit] of [[[], '1Gi'], [['persistence.emptyDirSizeLimit=2Gi'], '2Gi']] as const) {
        const all = docs(render(`mode=${mode}`, 'persistence.enabled=false', ...set));
        const workload = workloadOf(all);
        assert.equal(workload.kind, 'Deployment', mode);
        assert.equal(workload.spec!.volumeClaimTemplates, undefined);
        assert.equal(all.find((d) => d.kind === 'Service' && d.metadata.name.endsWith('-headless')), undefined, `${mode}: no headless Service`);
        const pod = workload.spec!.template.spec;
        const relsync = pod.containers.find((c) => c.name === 'relsync')!;
        const mount = relsync.volumeMounts!.find((m) => m.mountPath === '/var/lib/relsync')!;
        assert.deepEqual(pod.volumes.find((v) => v.name === mount.name)?.emptyDir, { sizeLimit: limit }, `${mode}: the store in an emptyDir of ${limit}`);
        for (const v of pod.volumes.filter((v) => v.emptyDir !== undefined)) assert.ok(v.emptyDir!.sizeLimit, `${mode}: emptyDir ${v.name} has a sizeLimit`);
      }
    }
  });

  it('grants exactly the RBAC rules of the kustomize base, and the config relsync runs with is the base\'s', () => {
    const chartDocs = docs(render());
    const base = docs(readFileSync(`${deploy}/rbac.yaml`, 'utf8'));
    const rules = (all: Manifest[], kind: string) => all.find((d) => d.kind === kind)?.rules;
    assert.deepEqual(rules(chartDocs, 'ClusterRole'), rules(base, 'ClusterRole'));
    assert.deepEqual(rules(chartDocs, 'Role'), rules(base, 'Role'));
    const config = chartDocs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'relsync-config')!;
    const parse = (text: string) => parseAllDocuments(text)[0]!.toJS() as unknown;
    assert.deepEqual(parse(config.data!['config.yaml']!), parse(readFileSync(`${deploy}/config.yaml`, 'utf8')));
    assert.deepEqual(parse(config.data!['service-kubeconfig.yaml']!), parse(readFileSync(`${deploy}/service-kubeconfig.yaml`, 'utf8')));
  });

  it('binds the admission policy of the kustomize base to the release\'s ServiceAccount and agent name; off with admissionPolicy.enabled=false', () => {
    const policyOf = (all: Array<Manifest & { spec?: unknown }>) => all.filter((d) => d.kind.startsWith('ValidatingAdmissionPolicy')).map((d) => ({ kind: d.kind, spec: d.spec }));
    const base = policyOf(docs(readFileSync(`${deploy}/admission-policy.yaml`, 'utf8')));
    const chartPolicy = policyOf(docs(render()));
    // Named after the release's namespace (one release per namespace, as the ClusterRole), the same in all else.
    const named = JSON.parse(JSON.stringify(base).replaceAll('relsync-demo-writes-marked-only', 'relsync-relsync-system-writes-marked-only')) as unknown;
    assert.deepEqual(chartPolicy, named);
    // Another namespace and agent name reach the identity, the mark and the content key's namespace.
    const other = JSON.stringify(policyOf(docs(helm('template', 'relsync', chart, '--namespace', 'sync', '--set', 'config.agentName=acme').stdout)));
    assert.match(other, /system:serviceaccount:sync:relsync/);
    assert.match(other, /"expression":"'acme'"/);
    assert.match(other, /"expression":"'sync'"/);
    assert.deepEqual(policyOf(docs(render('admissionPolicy.enabled=false'))), []);
  });

  it('grants the Leases of config.sharding.shards by name, as deploy/sharded does', () => {
    const chartDocs = docs(render('config.sharding.shards=6', 'replicas=3'));
    const overlay = mkdtempSync(join(tmpdir(), 'relsync-helm-sharded-'));
    writeFileSync(join(overlay, 'kustomization.yaml'), `resources: [${relative(overlay, deploy)}]\ncomponents: [${relative(overlay, join(deploy, 'sharded'))}]\n`);
    const built = kubectl(['kustomize', overlay]);
    assert.equal(built.status, 0, built.stderr);
    const role = (all: Manifest[]) => all.find((d) => d.kind === 'Role')?.rules;
    assert.deepEqual(role(chartDocs), role(docs(built.stdout)));
    const applied = kubectl(['apply', '--dry-run=server', '-f', '-'], render('config.sharding.shards=6', 'replicas=3'));
    assert.equal(applied.status, 0, applied.stderr);
  });

  it('renders what a provider sets: kubeconfig files of many lines, an existing Secret, no RBAC, an image tag', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-helm-'));
    const kubeconfig = join(dir, 'tenant-a.yaml');
    writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n# "quotes" and: colons\nclusters: []\n');
    const set = helm('template', 'relsync', chart, '--namespace', 'relsync-system', '--set-file', `platformKubeconfigs.files.tenant-a\\.yaml=${kubeconfig}`, '--set-string', 'image.tag=0.10');
    assert.equal(set.status, 0, set.stderr);
    const secret = docs(set.stdout).find((d) => d.kind === 'Secret' && d.metadata.name === 'relsync-platform-kubeconfigs') as unknown as { stringData: Record<string, string> };
    assert.equal(secret.stringData['tenant-a.yaml'], readFileSync(kubeconfig, 'utf8'), 'the file as it is');
    assert.match(set.stdout, /image: "relsync:0\.10"/);
    const none = docs(render('rbac.create=false', 'platformKubeconfigs.create=false'));
    assert.deepEqual(none.filter((d) => /Role/.test(d.kind) || d.metadata.name === 'relsync-platform-kubeconfigs').map((d) => d.kind), []);
    const out = kubectl(['apply', '--dry-run=server', '-f', '-'], render('rbac.create=false', 'platformKubeconfigs.create=false'));
    assert.equal(out.status, 0, out.stderr);
    assert.ok(out.stdout.includes('statefulset.apps/database-operator') && out.stdout.includes('service/database-operator-headless'), 'every namespaced object names the release\'s namespace (no -n given)');

    // metrics.auth=kubernetes: the flag, and the reviews relsync then asks for; not without it.
    const rulesOf = (rendered: string) => JSON.stringify(docs(rendered).find((d) => d.kind === 'ClusterRole'));
    const guarded = render('metrics.auth=kubernetes');
    assert.match(guarded, /"--metrics-auth", "kubernetes"/);
    assert.doesNotMatch(render(), /--metrics-auth/);
    assert.match(rulesOf(guarded), /tokenreviews.*subjectaccessreviews/);
    assert.doesNotMatch(rulesOf(render()), /tokenreviews/);
    const applied = kubectl(['apply', '--dry-run=server', '-f', '-'], guarded);
    assert.equal(applied.status, 0, applied.stderr);
  });

  it('runs relsync beside the operator (sidecar) or alone (standalone), with its own identity either way', () => {
    const podOf = (mode: string) => workloadOf(docs(render(`mode=${mode}`))).spec!.template.spec;
    const sidecar = podOf('sidecar');
    assert.deepEqual(sidecar.containers.map((c) => c.name), ['operator', 'relsync']);
    assert.equal(sidecar.serviceAccountName, 'database-operator');
    // The pod's token is the operator's: relsync's container has an empty directory in its place, and the operator none of relsync's credentials.
    const [operator, relsync] = sidecar.containers as Array<{ volumeMounts?: Array<{ name: string; mountPath: string }> }>;
    const tokenMount = relsync!.volumeMounts!.find((m) => m.mountPath === '/var/run/secrets/kubernetes.io/serviceaccount');
    assert.ok(tokenMount && sidecar.volumes.find((v) => v.name === tokenMount.name)?.emptyDir, 'relsync does not get the operator\'s token');
    assert.deepEqual((operator!.volumeMounts ?? []).filter((m) => m.name === 'relsync-token' || m.name === 'kubeconfigs'), []);
    const standalone = podOf('standalone');
    assert.deepEqual(standalone.containers.map((c) => c.name), ['relsync']);
    assert.equal(standalone.serviceAccountName, 'relsync');
    // Its token projected by the kubelet, as deploy/standalone's: the same volumes.
    const kustomized = docs(readFileSync(`${deploy}/standalone/statefulset.yaml`, 'utf8'))[0]!.spec!.template.spec;
    assert.deepEqual(standalone.volumes, kustomized.volumes);
    const longer = workloadOf(docs(render('mode=standalone', 'serviceAccountToken.expirationSeconds=7200'))).spec!.template.spec.volumes.find((v) => v.name === 'relsync-token');
    assert.match(JSON.stringify(longer), /"serviceAccountToken":\{"path":"token","expirationSeconds":7200\}/);
    assert.deepEqual(standalone.containers[0]!.args, ['run', '--config', '/etc/relsync/config.yaml', '--http-port', '8080', '--log-level', 'info', '--log-format', 'json']);
    // Applied for real: relsync's ServiceAccount may do what relsync does, and the operator none of it.
    const applied = kubectl(['apply', '-n', 'relsync-system', '-f', '-'], render());
    assert.equal(applied.status, 0, applied.stderr);
    const can = (as: string, verb: string, resource: string, namespace = 'tenant-a-ns') => kubectl(['auth', 'can-i', verb, resource, '--as', `system:serviceaccount:relsync-system:${as}`, '-n', namespace]).stdout.trim();
    assert.equal(can('relsync', 'patch', 'databases.demo.relsync.dev'), 'yes');
    assert.equal(can('relsync', 'update', 'leases.coordination.k8s.io/relsync-demo', 'relsync-system'), 'yes');
    assert.equal(can('relsync', 'update', 'leases.coordination.k8s.io/other', 'relsync-system'), 'no');
    assert.equal(can('relsync', 'patch', 'secrets'), 'no');
    assert.equal(can('database-operator', 'create', 'namespaces'), 'no');
  });

  it('renders the base\'s NetworkPolicy, and admits what networkPolicy and metrics.port say (server-side dry run of each)', () => {
    const policyOf = (all: Manifest[]) => all.find((d) => d.kind === 'NetworkPolicy') as unknown as (NetworkPolicy & Manifest) | undefined;
    // The pod a rendering runs, with its named ports, for the policy's questions.
    const podOf = (all: Manifest[]) => {
      const template = workloadOf(all).spec!.template;
      const namedPorts = Object.fromEntries(template.spec.containers.flatMap((c) => (c.ports ?? []).filter((p) => p.name).map((p) => [p.name!, p.containerPort])));
      return { namespace: 'relsync-system', labels: template.metadata.labels, namedPorts };
    };
    const closedTo = (set: string[], peer: PodRef) => {
      const all = docs(render(...set));
      const policy = { ...policyOf(all)!, metadata: { namespace: 'relsync-system' } };
      const pod = podOf(all);
      assert.notEqual(admits(policy, pod, peer, 1), undefined, `${set.join(' ')}: the policy selects the workload's pods`);
      const closed: number[] = [];
      for (let port = 1; port <= 65535; port++) if (!admits(policy, pod, peer, port)) closed.push(port);
      const dry = kubectl(['apply', '--dry-run=server', '-f', '-'], render(...set));
      assert.equal(dry.status, 0, `${set.join(' ')}: ${dry.stderr}`);
      return { closed, admits: (from: PodRef, port: number) => admits(policy, pod, from, port) };
    };
    const prometheus: PodRef = { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' } };
    const stranger: PodRef = { namespace: 'tenant-a-ns', labels: { 'app.kubernetes.io/name': 'prometheus' } };

    // The default (sidecar) is deploy/network-policy.yaml, but for the release's instance label on the pods it selects.
    const base = docs(readFileSync(`${deploy}/network-policy.yaml`, 'utf8'))[0] as unknown as NetworkPolicy;
    const chartPolicy = policyOf(docs(render()))!;
    assert.deepEqual([chartPolicy.spec.policyTypes, chartPolicy.spec.ingress], [base.spec.policyTypes, base.spec.ingress]);
    const sidecar = closedTo([], stranger);
    assert.deepEqual(sidecar.closed, [8080], 'sidecar: only relsync\'s port closed to a stranger');
    assert.equal(sidecar.admits(prometheus, 8080), true);
    // Another port: the ranges follow it.
    const moved = closedTo(['metrics.port=9090'], stranger);
    assert.deepEqual(moved.closed, [9090]);
    assert.equal(moved.admits(prometheus, 9090), true);
    // The operator's ports as a provider lists them: only those stay open.
    const listed = closedTo(['networkPolicy.operatorIngress[0].ports[0].port=9443'], stranger);
    assert.equal(listed.closed.length, 65534);
    assert.ok(!listed.closed.includes(9443));
    // Standalone: relsync's pod has no other port; Prometheus's own selector; no peers at all.
    const standalone = closedTo(['mode=standalone'], stranger);
    assert.equal(standalone.closed.length, 65535);
    assert.equal(standalone.admits(prometheus, 8080), true);
    const own = closedTo(['mode=standalone', 'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=observability'], prometheus);
    assert.equal(own.closed.length, 65535, 'a Prometheus outside the configured namespace is not admitted');
    assert.equal(own.admits({ namespace: 'obs', namespaceLabels: { team: 'observability' }, labels: {} }, 8080), true);
    const nobody = closedTo(['mode=standalone', 'networkPolicy.metricsFrom=null'], prometheus);
    assert.equal(nobody.closed.length, 65535, 'no peers: no one (a rule without peers would admit all)');
    assert.equal(policyOf(docs(render('networkPolicy.enabled=false'))), undefined);
  });

  it('serves the port over TLS from a Secret with metrics.tls.secretName: the flags, the whole Secret mounted, HTTPS probes', () => {
    const plain = workloadOf(docs(render())).spec!.template.spec;
    assert.equal(plain.volumes.find((v) => v.name === 'tls'), undefined);
    const rendered = render('metrics.tls.secretName=relsync-metrics-tls');
    const pod = workloadOf(docs(rendered)).spec!.template.spec;
    const relsync = pod.containers.find((c) => c.name === 'relsync')!;
    const args = relsync.args!.join(' ');
    assert.match(args, /--tls-cert-file \/etc\/relsync\/tls\/tls\.crt --tls-private-key-file \/etc\/relsync\/tls\/tls\.key/);
    const mount = relsync.volumeMounts!.find((m) => m.mountPath === '/etc/relsync/tls')!;
    assert.equal(mount.subPath, undefined, 'no subPath: a renewed Secret reaches the files');
    assert.equal(mount.readOnly, true);
    // Read-only for its owner, as the token's (the same mode as written).
    const token = pod.volumes.find((v) => v.name === 'relsync-token')!.secret!;
    assert.deepEqual(pod.volumes.find((v) => v.name === mount.name)?.secret, { secretName: 'relsync-metrics-tls', defaultMode: token.defaultMode });
    assert.deepEqual([relsync.livenessProbe?.httpGet?.scheme, relsync.readinessProbe?.httpGet?.scheme], ['HTTPS', 'HTTPS']);
    const dry = kubectl(['apply', '--dry-run=server', '-f', '-'], rendered);
    assert.equal(dry.status, 0, dry.stderr);
  });
});

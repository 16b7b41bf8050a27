// deploy/helm/relsync: linted and rendered by a real helm (built from its Go module), its output
// accepted by a real API server (server-side dry run), in both modes; once applied, relsync's
// ServiceAccount may do what the kustomize base (deploy/) lets it do, and the two render the same
// RBAC rules.
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

const chart = fileURLToPath(new URL('../../../deploy/helm/relsync', import.meta.url));
const deploy = fileURLToPath(new URL('../../../deploy', import.meta.url));

interface Manifest {
  kind: string;
  metadata: { name: string };
  rules?: unknown[];
  data?: Record<string, string>;
  spec?: { template: { spec: { serviceAccountName?: string; containers: Array<{ name: string; args?: string[] }> } } };
}
const docs = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as Manifest | null).filter((d): d is Manifest => d !== null);

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

  it('renders what a real API server accepts, in both modes (server-side dry run)', () => {
    for (const mode of ['sidecar', 'standalone']) {
      const out = kubectl(['apply', '--dry-run=server', '-n', 'relsync-system', '-f', '-'], render(`mode=${mode}`));
      assert.equal(out.status, 0, `${mode}: ${out.stderr}`);
      for (const kind of ['serviceaccount/relsync', 'secret/relsync-token', 'clusterrole.rbac.authorization.k8s.io/relsync-relsync-system', 'role.rbac.authorization.k8s.io/relsync', 'configmap/relsync-config', 'secret/relsync-platform-kubeconfigs', 'service/relsync-metrics', `deployment.apps/${mode === 'sidecar' ? 'database-operator' : 'relsync'}`]) {
        assert.ok(out.stdout.includes(kind), `${mode}: ${kind} in:\n${out.stdout}`);
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
    assert.ok(out.stdout.includes('deployment.apps/database-operator'), 'every namespaced object names the release\'s namespace (no -n given)');

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
    const deployment = (mode: string) => docs(render(`mode=${mode}`)).find((d) => d.kind === 'Deployment')!.spec!.template.spec;
    const sidecar = deployment('sidecar');
    assert.deepEqual(sidecar.containers.map((c) => c.name), ['operator', 'relsync']);
    assert.equal(sidecar.serviceAccountName, 'database-operator');
    // The pod's token is the operator's: relsync's container has an empty directory in its place, and the operator none of relsync's credentials.
    const [operator, relsync] = sidecar.containers as Array<{ volumeMounts?: Array<{ name: string; mountPath: string }> }>;
    const tokenMount = relsync!.volumeMounts!.find((m) => m.mountPath === '/var/run/secrets/kubernetes.io/serviceaccount');
    assert.ok(tokenMount && (sidecar as unknown as { volumes: Array<{ name: string; emptyDir?: object }> }).volumes.find((v) => v.name === tokenMount.name)?.emptyDir, 'relsync does not get the operator\'s token');
    assert.deepEqual((operator!.volumeMounts ?? []).filter((m) => m.name === 'relsync-token' || m.name === 'kubeconfigs'), []);
    const standalone = deployment('standalone');
    assert.deepEqual(standalone.containers.map((c) => c.name), ['relsync']);
    assert.equal(standalone.serviceAccountName, 'relsync');
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
});

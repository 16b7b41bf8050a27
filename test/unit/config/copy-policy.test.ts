// Which keys and Secret types reach the other side, by default and as configured.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { defaultCopyPolicy } from '../../../src/config/copy-policy.js';
import { ConfigError } from '../../../src/config/config-problem.js';
import { loadConfig } from '../../../src/config/load-config.js';

describe('copy policy', () => {
  it('by default keeps keys that describe an object and drops those a cluster-wide tool acts on', () => {
    for (const key of ['app', 'team', 'example.com/owner', 'app.kubernetes.io/name', 'app.kubernetes.io/part-of']) assert.equal(defaultCopyPolicy.copiesLabel(key), true, key);
    for (const key of [
      'argocd.argoproj.io/instance', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by', 'kustomize.toolkit.fluxcd.io/name', 'fluxcd.io/automated', 'meta.helm.sh/release-name',
      'kubernetes.io/service-account.name', 'pod-security.kubernetes.io/enforce', 'node-role.kubernetes.io/control-plane', 'k8s.io/x', 'x.k8s.io/y', 'cert-manager.io/cluster-issuer',
      'replicator.v1.mittwald.de/replicate-to', 'reflector.v1.k8s.emberstack.com/reflection-allowed',
    ]) {
      assert.equal(defaultCopyPolicy.copiesLabel(key), false, key);
      assert.equal(defaultCopyPolicy.copiesAnnotation(key), false, key);
    }
    assert.match(defaultCopyPolicy.secretTypeRefusal('kubernetes.io/service-account-token') ?? '', /not copied/);
    assert.equal(defaultCopyPolicy.secretTypeRefusal('Opaque'), undefined);
    assert.equal(defaultCopyPolicy.secretTypeRefusal('kubernetes.io/tls'), undefined);
  });

  it('takes the lists from the config, and names a bad pattern by its path', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-copy-policy-'));
    writeFileSync(join(dir, 'kc.yaml'), 'apiVersion: v1\nkind: Config\n');
    const base = `platformClusters: [{name: a, kubeconfig: kc.yaml}]\nserviceCluster: {kubeconfig: kc.yaml}\nresources: [{resource: configmaps}]\n`;
    writeFileSync(join(dir, 'ok.yaml'), `${base}copy:\n  labels: {deny: ['team'], allow: []}\n  secretTypes: {deny: ['Opaque']}\n`);
    const config = loadConfig(join(dir, 'ok.yaml'));
    assert.equal(config.copy.copiesLabel('team'), false);
    assert.equal(config.copy.copiesLabel('argocd.argoproj.io/instance'), true, 'a deny list given replaces the default');
    assert.equal(config.copy.copiesAnnotation('meta.helm.sh/release-name'), false, 'annotations keep the default');
    assert.ok(config.copy.secretTypeRefusal('Opaque'));
    writeFileSync(join(dir, 'bad.yaml'), `${base}copy:\n  annotations: {deny: ['has space']}\n`);
    assert.throws(() => loadConfig(join(dir, 'bad.yaml')), (err: unknown) => err instanceof ConfigError && /copy\.annotations\.deny\[0\]/.test(err.message));
  });
});

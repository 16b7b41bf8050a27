// The config a complete sync is stored with: any change to what decides a
// reconcile's writes must change it, also what JSON leaves out (a RegExp), and
// a new content-hash key changes it too.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadConfig } from '../../../src/config/load-config.js';
import { ConfigFingerprint, fingerprintJson } from '../../../src/sync/config-fingerprint.js';
import { ContentHasher } from '../../../src/sync/content-hasher.js';
import { defaultCopyPolicy } from '../../../src/config/copy-policy.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';

describe('config fingerprint', () => {
  it('tells apart what JSON.stringify would not: RegExps, key order aside', () => {
    assert.notEqual(fingerprintJson({ pattern: /^a$/ }), fingerprintJson({ pattern: /^b$/ }));
    assert.notEqual(fingerprintJson({ pattern: /^a$/ }), fingerprintJson({ pattern: /^a$/i }));
    assert.equal(fingerprintJson({ a: 1, b: [1, 'x'] }), fingerprintJson({ b: [1, 'x'], a: 1 }));
    assert.notEqual(fingerprintJson({ a: undefined }), fingerprintJson({}));
  });

  it('changes with the resource, the shared settings and the key', () => {
    const resource = (name: string) => ({ where: 'resources[0]', naming: { name: { source: name } }, rules: [] }) as unknown as ResolvedResource;
    const shared = { agentName: 'a', policy: defaultCopyPolicy, limits: { relatedPerPrimary: 500 } };
    const one = new ConfigFingerprint(new ContentHasher(Buffer.alloc(32, 1)), shared);
    const r = resource('{{ name }}');
    assert.equal(one.of(r), one.of(r));
    assert.notEqual(one.of(r), one.of(resource('{{ name }}-x')));
    assert.notEqual(one.of(r), new ConfigFingerprint(new ContentHasher(Buffer.alloc(32, 1)), { ...shared, limits: { relatedPerPrimary: 400 } }).of(r));
    assert.notEqual(one.of(r), new ConfigFingerprint(new ContentHasher(Buffer.alloc(32, 2)), shared).of(r), 'a new key');
    let pins = 'a';
    const pinned = new ConfigFingerprint(new ContentHasher(Buffer.alloc(32, 1)), shared, () => pins);
    const before = pinned.of(r);
    pins = 'b';
    assert.notEqual(pinned.of(r), before, 'copies of a source namespace pinned elsewhere');
  });

  it('fingerprints a whole compiled config, every kind of rule, and changes with any copy policy list', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-fingerprint-'));
    writeFileSync(join(dir, 'kc.yaml'), 'apiVersion: v1\nkind: Config\n');
    const related = [
      { id: 'ref', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName', rewrite: { regex: { pattern: '^(.*)$', replacement: '$1-x' } } } },
      { id: 'tpl', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-creds' }, namespace: { destination: 'landing-{{ name }}' } },
      { id: 'sel', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' }, rewrite: { template: '{{ name }}-{{ value }}' } } },
      { id: 'inv', origin: 'platform', resource: 'secrets', inverse: { namePattern: '^(?<name>[a-z0-9-]+)\\.creds$' } },
      { id: 'inv-s', origin: 'service', resource: 'configmaps', inverse: { label: 'owner' } },
    ];
    const write = (name: string, copy: unknown) => {
      const config = { platformClusters: [{ name: 'a', kubeconfig: 'kc.yaml' }], serviceCluster: { kubeconfig: 'kc.yaml' }, resources: [{ group: 'demo.relsync.dev', resource: 'databases', related }], ...(copy ? { copy } : {}) };
      writeFileSync(join(dir, name), JSON.stringify(config));
      return loadConfig(join(dir, name));
    };
    const fingerprintOf = (config: ReturnType<typeof loadConfig>) =>
      new ConfigFingerprint(new ContentHasher(Buffer.alloc(32, 1)), { agentName: config.agentName, policy: config.copy, limits: config.limits }).of(config.resources[0] as unknown as ResolvedResource);
    const base = fingerprintOf(write('base.yaml', undefined));
    assert.equal(fingerprintOf(write('same.yaml', undefined)), base, 'the same config: the same fingerprint');
    assert.notEqual(fingerprintOf(write('labels.yaml', { labels: { deny: ['team'], allow: [] } })), base, 'another label deny list');
    assert.notEqual(fingerprintOf(write('secrets.yaml', { secretTypes: { deny: ['kubernetes.io/dockerconfigjson'] } })), base, 'another Secret type deny list');
  });
});

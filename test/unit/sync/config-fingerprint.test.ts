// The config a complete sync is stored with: any change to what decides a
// reconcile's writes must change it, also what JSON leaves out (a RegExp), and
// a new content-hash key changes it too.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
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
});

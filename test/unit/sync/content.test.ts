import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createHash } from 'node:crypto';
import { contentOf, isSubset, isUpToDate, stableJson } from '../../../src/sync/content.js';
import { ContentHasher } from '../../../src/sync/content-hasher.js';
import { marksFor } from '../../../src/core/marks.js';

const source = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'ns', uid: 'u', resourceVersion: '5', labels: { app: 'x' }, annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}' } }, type: 'Opaque', data: { k: 'dg==' } };
const marks = marksFor('agent', { cluster: 'a', group: '', resource: 'secrets', namespace: 'ns', name: 's' }, 'u');

describe('content', () => {
  it('copies payload and user labels, never server metadata', () => {
    const c = contentOf(source);
    assert.deepEqual(c.fields, { type: 'Opaque', data: { k: 'dg==' } });
    assert.deepEqual(c.labels, { app: 'x' });
    assert.deepEqual(c.annotations, {});
  });

  it('never copies kcp’s own metadata, which says where the object lives in kcp', () => {
    const fromKcp = {
      ...source,
      metadata: { ...source.metadata, labels: { app: 'x', 'claimed.internal.apis.kcp.io/abc': 'def' }, annotations: { 'kcp.io/cluster': '1pr8q7w2btjziqqh', note: 'kept', 'example.com/kcp.io': 'kept too' } },
    };
    const c = contentOf(fromKcp);
    assert.deepEqual(c.labels, { app: 'x' });
    assert.deepEqual(c.annotations, { note: 'kept', 'example.com/kcp.io': 'kept too' });
  });

  it('is up to date while every value relsync applies holds, whatever else the copy carries; what the source drops shows through the hash in the marks', () => {
    const desired = contentOf(source);
    const hashed = (h: string) => ({ labels: marks.labels, annotations: { ...marks.annotations, 'relsync.dev/content-hash': h } });
    const copy = { ...source, data: { k: 'dg==', theirs: 'eA==' }, metadata: { name: 's', labels: { app: 'x', tier: 'operator', ...marks.labels }, annotations: { ...hashed('h1').annotations, 'relsync.dev/copied-labels': 'app' } } };
    assert.equal(isUpToDate(desired, hashed('h1'), copy), true, "others' keys, labels and leftover annotations are theirs");
    assert.equal(isUpToDate(desired, hashed('h2'), copy), false, 'a new hash: the source changed (or dropped something)');
    assert.equal(isUpToDate(desired, hashed('h1'), { ...copy, data: { theirs: 'eA==' } }), false, 'a key of relsync\'s gone from the copy');
  });

  it("a copy whose marks carry another hash is not up to date, and its wide fields are not walked to say so", () => {
    const names = Array.from({ length: 30_000 }, (_, i) => `secret-${i}`);
    let reads = 0;
    const counted = new Proxy({ tlsSecrets: names }, { get: (t, k) => (reads++, Reflect.get(t, k)), ownKeys: (t) => (reads++, Reflect.ownKeys(t)) });
    const copy = { apiVersion: 'x/v1', kind: 'X', metadata: { name: 'c', labels: marks.labels, annotations: { ...marks.annotations, 'relsync.dev/content-hash': 'old' } }, spec: counted };
    const desired = contentOf({ apiVersion: 'x/v1', kind: 'X', metadata: { name: 'c' }, spec: { tlsSecrets: [...names.slice(1), 'new'] } });
    assert.equal(isUpToDate(desired, { labels: marks.labels, annotations: { ...marks.annotations, 'relsync.dev/content-hash': 'new' } }, copy), false);
    assert.equal(reads, 0, 'the copy\'s fields were read');
    // With the same hash, the fields still decide (drift is set back).
    assert.equal(isUpToDate(desired, { labels: marks.labels, annotations: { ...marks.annotations, 'relsync.dev/content-hash': 'old' } }, copy), false);
    assert.ok(reads > 0);
    assert.ok(isSubset({ a: names, b: { c: [1, { d: null }] } }, { a: [...names], b: { c: [1, { d: null, e: 2 }] }, x: 1 }));
    assert.ok(!isSubset({ a: names }, { a: [...names.slice(0, -1), 'other'] }));
    assert.ok(!isSubset({ b: { c: [1, { d: null }] } }, { b: { c: [1, { d: 0 }] } }));
  });

  it('hashes without the value order mattering, never containing the value, and under a key (no offline guessing)', () => {
    const hasher = new ContentHasher(Buffer.alloc(32, 7));
    const h = hasher.hash(contentOf(source));
    assert.equal(h, hasher.hash(contentOf({ ...source, data: { k: 'dg==' } })));
    assert.ok(!h.includes('dg=='));
    assert.notEqual(h, hasher.hash(contentOf({ ...source, data: { k: 'other' } })));
    // Someone who reads the hash but not the key cannot test a guess: the plain sha256 of the guessed content is not it.
    assert.notEqual(h, createHash('sha256').update(stableJson(contentOf(source))).digest('hex'));
    assert.notEqual(h, new ContentHasher(Buffer.alloc(32, 8)).hash(contentOf(source)), 'another key, another hash');
  });

  it('treats server defaults and keys others added as up to date, but a changed value of relsync\'s as drift', () => {
    const copy = { ...source, metadata: { name: 's', labels: { app: 'x', ...marks.labels }, annotations: { ...marks.annotations } } };
    assert.ok(isUpToDate(contentOf(source), marks, copy));
    assert.ok(isUpToDate(contentOf(source), marks, { ...copy, data: { k: 'dg==', extra: 'eA==' } }), 'a key someone else added stays theirs (an apply would not remove it)');
    assert.ok(!isUpToDate(contentOf(source), marks, { ...copy, data: { k: 'changed' } }));
    const cr = { apiVersion: 'x/v1', kind: 'X', metadata: { name: 'c' }, spec: { a: 1 } };
    assert.ok(isUpToDate(contentOf(cr), marks, { ...cr, metadata: { name: 'c', labels: marks.labels, annotations: marks.annotations }, spec: { a: 1, defaulted: true } }));
    assert.ok(!isUpToDate(contentOf(cr), marks, { ...cr, metadata: { name: 'c', labels: marks.labels, annotations: marks.annotations }, spec: { a: 2 } }));
  });

  it("compares and hashes content nested 100,000 levels deep (a tenant's copy): no walk recurses", () => {
    const deep = (leaf: string) => JSON.parse(`${'{"a":'.repeat(100_000)}"${leaf}"${'}'.repeat(100_000)}`) as Record<string, unknown>;
    const copy = { apiVersion: 'x/v1', kind: 'X', metadata: { name: 'c' }, spec: deep('v') };
    assert.ok(isSubset({ spec: deep('v') }, copy));
    assert.ok(!isSubset({ spec: deep('w') }, copy));
    assert.equal(stableJson(copy.spec).length, 100_000 * 6 + 3);
    const hasher = new ContentHasher(Buffer.alloc(32, 7));
    assert.notEqual(hasher.hash(contentOf(copy)), hasher.hash(contentOf({ ...copy, spec: deep('w') })));
  });
});

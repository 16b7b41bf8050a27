// The answer of a status write is read as its apiVersion, kind, metadata and status, the same as
// JSON.parse reads them, whatever the content around them; the content is never parsed, and what
// is parsed is bounded as a whole answer is.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { objectHead } from '../../../src/kube/object-head.js';
import { ResourceClient } from '../../../src/kube/resource-client.js';
import type { Connection, RequestOptions } from '../../../src/kube/connection.js';

const MiB = 1024 * 1024;

describe('object head', () => {
  it('reads apiVersion, kind, metadata and status as JSON.parse does', () => {
    const text = fc.string({ unit: 'grapheme-ascii' });
    const value = fc.oneof(text, fc.integer(), fc.constant(null), fc.dictionary(text, text, { maxKeys: 3 }), fc.array(text, { maxLength: 3 }));
    fc.assert(
      fc.property(fc.dictionary(text, value, { maxKeys: 4 }), fc.option(fc.dictionary(text, value, { maxKeys: 3 })), fc.dictionary(text, value, { maxKeys: 3 }), (metadata, status, spec) => {
        const object = { apiVersion: 'demo/v1', kind: 'Database', metadata, spec: { ...spec, status: 'decoy' }, ...(status ? { status } : {}), data: spec };
        const expected = Object.fromEntries(Object.entries(JSON.parse(JSON.stringify(object)) as Record<string, unknown>).filter(([k]) => k !== 'spec' && k !== 'data'));
        assert.deepEqual(objectHead(JSON.stringify(object), 72 * MiB), expected);
      }),
      { numRuns: 300 },
    );
  });

  it('never parses the content: a megabyte of it costs no more than its scan, and its own form is not checked', () => {
    const spec = { names: Array.from({ length: 150_000 }, (_, i) => `name-${i}`) };
    const text = JSON.stringify({ kind: 'Database', metadata: { name: 'a', resourceVersion: '7' }, spec, status: { conditions: [{ type: 'X' }] } });
    assert.ok(text.length > MiB);
    // Under a cap the whole answer is over (it says ~7 MiB), the head is read.
    assert.deepEqual(objectHead(text, 64 * 1024), { kind: 'Database', metadata: { name: 'a', resourceVersion: '7' }, status: { conditions: [{ type: 'X' }] } });
    assert.deepEqual(objectHead('{"metadata":{"name":"a"},"spec":[{]}}', MiB), { metadata: { name: 'a' } });
  });

  it('refuses a head over the cap, and says nothing of what is not an object with metadata', () => {
    const wide = JSON.stringify({ metadata: { name: 'a' }, status: { v: Array.from({ length: 50_000 }, () => []) } });
    assert.throws(() => objectHead(wide, MiB), /limits\.parsedBytes/);
    for (const text of ['[]', '{"kind":"X"}', '{"metadata":"x"}', '{"metadata":{}} trailing', '{"metadata":{}']) assert.equal(objectHead(text, MiB), undefined, text);
  });

  it("a status write's answer is not quoted when it is not JSON (a tenant's values)", () => {
    assert.throws(() => objectHead('{"metadata":{"name":"a"},"status":{"k": secretvalue}}', MiB), (err: Error) => !err.message.includes('secretvalue') && /status \(\d+ characters\) is not JSON/.test(err.message));
  });

  it('patchStatus sends a merge patch of the given status members at the version, to the status subresource, and reads the answer by its head', async () => {
    const sent: Array<{ method: string; path: string; options: RequestOptions }> = [];
    const answer = JSON.stringify({ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { name: 'a', namespace: 'ns', resourceVersion: '8' }, spec: { huge: 'x'.repeat(100_000) }, status: { conditions: [{ type: 'X' }] } });
    const connection = { request: async (method: string, path: string, options: RequestOptions) => (sent.push({ method, path, options }), options.readText!(answer, MiB)) } as unknown as Connection;
    const client = new ResourceClient(connection, { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true });
    const written = await client.patchStatus('ns', 'a', '7', { conditions: [{ type: 'X' }] });
    assert.deepEqual(sent.map((s) => [s.method, s.path, s.options.contentType, s.options.body]), [['PATCH', '/apis/demo.relsync.dev/v1alpha1/namespaces/ns/databases/a/status', 'application/merge-patch+json', { metadata: { resourceVersion: '7' }, status: { conditions: [{ type: 'X' }] } }]]);
    assert.deepEqual(written, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { name: 'a', namespace: 'ns', resourceVersion: '8' }, status: { conditions: [{ type: 'X' }] } });
  });
});

// A watch line too costly to parse says which object it is about: its type and identity are read
// off the text, the same as JSON.parse would read them, whatever a tenant's own API server puts
// around them, and nothing else of the object is parsed (labels of any size cost a scan).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { changeHead, deletedObject, watchEventHead } from '../../../src/kube/watch-event-head.js';

const identity = (line: string) => {
  const event = JSON.parse(line) as { type: string; object: { metadata: Record<string, unknown> } };
  const m = event.object.metadata;
  const pick: Record<string, unknown> = {};
  for (const f of ['name', 'namespace', 'uid', 'resourceVersion']) if (typeof m[f] === 'string') pick[f] = m[f];
  const cluster = (m.annotations as Record<string, unknown> | undefined)?.['kcp.io/cluster'];
  if (typeof m.annotations === 'object' && m.annotations !== null && !Array.isArray(m.annotations)) pick.annotations = typeof cluster === 'string' ? { 'kcp.io/cluster': cluster } : {};
  return { type: event.type, metadata: pick };
};

describe('watch event head', () => {
  it('reads the type and identity as JSON.parse does, for any metadata around them', () => {
    const text = fc.string({ unit: 'grapheme-ascii' });
    const value = fc.oneof(text, fc.integer(), fc.constant(null), fc.dictionary(text, text, { maxKeys: 3 }), fc.array(text, { maxLength: 3 }));
    fc.assert(
      fc.property(
        fc.constantFrom('ADDED', 'MODIFIED', 'DELETED'),
        fc.record({ name: text, namespace: text, uid: text, resourceVersion: text }, { requiredKeys: ['name'] }),
        fc.dictionary(fc.oneof(text, fc.constant('annotations')), value, { maxKeys: 4 }),
        fc.option(fc.dictionary(fc.oneof(text, fc.constant('kcp.io/cluster')), text, { maxKeys: 3 })),
        fc.dictionary(text, value, { maxKeys: 3 }),
        (type, id, extra, annotations, spec) => {
          const metadata = { ...extra, ...id, ...(annotations ? { annotations } : {}) };
          // metadata nested in spec, and strings of braces and quotes, must not mislead it.
          const line = JSON.stringify({ type, object: { kind: 'X', spec: { ...spec, metadata: { name: 'decoy' } }, metadata } });
          assert.deepEqual(watchEventHead(line), identity(line));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('takes the last of a repeated key, reads escaped keys, and leaves out a name that is not a string', () => {
    const line = '{"type":"ADDED","object":{"metadata":{"name":"first","na\\u006de":"second","uid":7,"namespace":"ns","annotations":{"kcp.io\\/cluster":"root:a"}}}}';
    assert.deepEqual(watchEventHead(line), identity(line));
    assert.deepEqual(watchEventHead(line)?.metadata, { name: 'second', namespace: 'ns', annotations: { 'kcp.io/cluster': 'root:a' } });
    assert.equal(watchEventHead('{"type":"ADDED","object":{"metadata":{"name":{"x":1}}}}')?.metadata.name, undefined);
  });

  it('reads the identity of an object with megabytes of labels without parsing them', () => {
    const labels = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, 'v']));
    const line = JSON.stringify({ type: 'MODIFIED', object: { metadata: { name: 'wide', namespace: 'ns', labels, resourceVersion: '9' }, data: { a: 'b' } } });
    const head = watchEventHead(line);
    assert.deepEqual(head, { type: 'MODIFIED', metadata: { name: 'wide', namespace: 'ns', resourceVersion: '9' } });
  });

  it('says nothing of a line that is not an event', () => {
    for (const line of ['', 'null', '[]', '{"type":"ADDED"}', '{"object":{"metadata":{"name":"x"}}}', '{"type":"ADDED","object":{"metadata":{"name":"x"}', '{"type":1,"object":{"metadata":{}}}']) {
      assert.equal(watchEventHead(line), undefined, line);
    }
  });
});

describe('a deleted object read by its metadata', () => {
  /** What JSON.parse reads of a DELETED line's object, its apiVersion, kind and metadata. */
  const expected = (line: string) => {
    const { object } = JSON.parse(line) as { object: Record<string, unknown> };
    return Object.fromEntries(['apiVersion', 'kind', 'metadata'].filter((f) => f in object).map((f) => [f, object[f]]));
  };

  it('reads apiVersion, kind and metadata as JSON.parse does, whatever the content around them', () => {
    const text = fc.string({ unit: 'grapheme-ascii' });
    const value = fc.oneof(text, fc.integer(), fc.constant(null), fc.dictionary(text, text, { maxKeys: 3 }), fc.array(text, { maxLength: 3 }));
    fc.assert(
      fc.property(fc.dictionary(text, value, { maxKeys: 5 }), fc.dictionary(text, value, { maxKeys: 3 }), fc.boolean(), (metadata, spec, withKind) => {
        const line = JSON.stringify({ type: 'DELETED', object: { ...(withKind ? { apiVersion: 'v1', kind: 'ConfigMap' } : {}), spec: { ...spec, metadata: { name: 'decoy' } }, metadata, data: spec } });
        const read = deletedObject(line);
        assert.ok(read);
        assert.deepEqual(read.read(), expected(line));
        assert.equal(read.metadataText, JSON.stringify(metadata));
      }),
      { numRuns: 500 },
    );
  });

  it('takes the last of a repeated metadata, and reads nothing of any other event type or of a broken line', () => {
    const line = '{"type":"DELETED","object":{"metadata":{"name":"first"},"data":{"k":"v"},"metadata":{"name":"second","labels":{"a":"b"}}}}';
    assert.deepEqual(deletedObject(line)?.read(), { metadata: { name: 'second', labels: { a: 'b' } } });
    for (const other of [
      '{"type":"MODIFIED","object":{"metadata":{"name":"x"}}}',
      '{"object":{"metadata":{"name":"x"}},"type":"DELETED"}',
      '{"type":"DELETED","object":{"metadata":{"name":"x"}}',
      '{"type":"DELETED","object":{"data":{}}}',
      '{"type":"DELETED","object":{"metadata":{"name":"x"}}} trailing',
    ]) assert.equal(deletedObject(other), undefined, other);
    assert.equal(deletedObject('{"type":"DELETED","object":{"metadata":"x"}}')?.read(), undefined, 'metadata that is not an object');
    // apiVersion and kind are strings: anything else would be parsed uncharged, so the line is read whole.
    for (const field of ['apiVersion', 'kind']) assert.equal(deletedObject(`{"type":"DELETED","object":{"${field}":[[],[],[]],"metadata":{"name":"x"}}}`), undefined, field);
  });

  it("charges the metadata, not a megabyte of content: the content is scanned, never parsed", () => {
    const content = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, 'v'.repeat(20)]));
    const line = JSON.stringify({ type: 'DELETED', object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'wide', namespace: 'ns', resourceVersion: '9' }, data: content } });
    const read = deletedObject(line);
    assert.ok(line.length > 1_000_000 && read !== undefined && read.metadataText.length < 100);
    assert.deepEqual(read.read(), { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'wide', namespace: 'ns', resourceVersion: '9' } });
  });
});

describe("a change's head, read off its line", () => {
  it('reads the type and identity of an ADDED or MODIFIED line without parsing its content', () => {
    // The content is scanned for its brackets, never parsed: `[{]}` is not JSON, and is passed.
    const line = '{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"7","labels":{"x":"y"},"annotations":{"kcp.io/cluster":"root:w"}},"data":[{]}}}';
    assert.deepEqual(changeHead(line), { type: 'MODIFIED', metadata: { name: 'a', namespace: 'ns', resourceVersion: '7', annotations: { 'kcp.io/cluster': 'root:w' } } });
    assert.deepEqual(changeHead('{"type":"ADDED","object":{"metadata":{"name":"b"}}}'), { type: 'ADDED', metadata: { name: 'b' } });
    assert.deepEqual(changeHead('{"object":{"metadata":{"name":"c"}},"type":"MODIFIED"}'), { type: 'MODIFIED', metadata: { name: 'c' } }, 'in any order');
  });

  it('says nothing of a deletion, metadata without a name, or a line JSON.parse could read as another event', () => {
    for (const line of [
      '{"type":"DELETED","object":{"metadata":{"name":"x"}}}',
      '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5"}}}',
      '{"type":"MODIFIED","object":{"metadata":{"namespace":"ns"}}}',
      '{"type":"MODIFIED","object":{"data":{}}}',
      '{"type":"MODIFIED","object":[]}',
      // Where JSON.parse would read another event than the start says (the last of a repeated key counts there).
      '{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"5"}},"type":"DELETED"}',
      '{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"5"}},"object":{"metadata":{"name":"b"}}}',
      '{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"5"},"metadata":{"name":"b"}}}',
      '{"type":"MODIFIED","object":{"metadata":{"name":"a"}}} {"more":1}',
      '{"type":"MODIFIED","object":{"metadata":{"name":"a"}}',
    ]) assert.equal(changeHead(line), undefined, line);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultCopyPolicy } from '../../../src/config/copy-policy.js';
import type { KubeObject } from '../../../src/core/object.js';
import { parseJsonPath } from '../../../src/rules/json-path.js';
import { mutated } from '../../../src/rules/mutation.js';
import { Template } from '../../../src/rules/template.js';
import { contentOf, deepEqual, isSubset, stableJson } from '../../../src/sync/content.js';
import { ContentHasher } from '../../../src/sync/content-hasher.js';
import { CopyRefusals, MAX_COPY_DEPTH } from '../../../src/sync/copy-refusals.js';

const refusals = new CopyRefusals(defaultCopyPolicy, { get: () => ({ kind: 'kubernetes' }) });

/** A Database whose spec.nested holds `{"a":{"a":…}}`, the object `depth` levels deep in all. */
function database(depth: number): KubeObject {
  const inner = depth - 1; // the object itself is the first level, spec the second
  return JSON.parse(`{"apiVersion":"demo.relsync.dev/v1alpha1","kind":"Database","metadata":{"name":"d","namespace":"ns","managedFields":[{"fieldsV1":{"f:spec":{"f:a":{"f:a":{}}}}}]},"spec":${'{"a":'.repeat(inner - 1)}{"a":"bottom"}${'}'.repeat(inner - 1)}}`) as KubeObject;
}

describe('copy refusals: depth', () => {
  it(`reads an object up to ${MAX_COPY_DEPTH} levels deep and refuses one deeper, naming the field`, () => {
    assert.equal(refusals.depth(database(MAX_COPY_DEPTH)), undefined);
    assert.match(refusals.depth(database(MAX_COPY_DEPTH + 1)) ?? '', new RegExp(`its field "spec" is nested deeper than ${MAX_COPY_DEPTH} levels`));
    assert.match(refusals.depth(database(9_993)) ?? '', /"spec"/);
  });

  it('refuses by labels and annotations only when their JSON is bound to be over the limit: never below what the whole copy is', () => {
    const small = new CopyRefusals(defaultCopyPolicy, { get: () => ({ kind: 'kubernetes' }) }, 1000);
    const labels = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`key-${i}`, 'v'.repeat(40)]));
    const content = { fields: {}, labels, annotations: { note: 'n'.repeat(100) } };
    const said = small.metadataSize(content);
    assert.match(said ?? '', /its labels and annotations alone are at least \d+ bytes; relsync copies at most 1000/);
    // The bound never passes what size() measures of the same copy written out.
    const least = Number(/at least (\d+) bytes/.exec(said!)![1]);
    assert.ok(least <= Buffer.byteLength(JSON.stringify(content)), `${least} bytes said, ${Buffer.byteLength(JSON.stringify(content))} written`);
    assert.equal(small.metadataSize({ labels: { a: 'b' }, annotations: {} }), undefined);
    assert.equal(refusals.metadataSize(content), undefined, 'under the default 1 MiB');
  });

  it('does not count managed fields, which mirror the fields a few levels deeper and are never copied', () => {
    const object = database(MAX_COPY_DEPTH);
    object.metadata.managedFields = [{ fieldsV1: JSON.parse(`${'{"f:a":'.repeat(MAX_COPY_DEPTH)}{}${'}'.repeat(MAX_COPY_DEPTH)}`) as unknown }];
    assert.equal(refusals.depth(object), undefined);
    object.metadata['unknown'] = JSON.parse(`${'['.repeat(MAX_COPY_DEPTH)}${']'.repeat(MAX_COPY_DEPTH)}`) as unknown;
    assert.match(refusals.depth(object) ?? '', /"metadata"/);
  });

  it(`an object at the limit goes through every walk of a copy: content, hashes, comparisons, mutation, templates`, () => {
    const object = database(MAX_COPY_DEPTH);
    const content = contentOf(object, defaultCopyPolicy);
    const hasher = new ContentHasher(Buffer.alloc(32, 1));
    assert.equal(hasher.hash(content), hasher.hashSerialized(stableJson(content)));
    assert.ok(isSubset(content.fields, object));
    assert.ok(deepEqual(structuredClone(object), object));
    const path = parseJsonPath('.spec.a.a');
    const { result, problems } = mutated(content.fields, [{ kind: 'delete', path, where: 'resources[0].mutation.spec[0]' }], object);
    assert.deepEqual(problems, []);
    assert.equal(Object.keys(result.spec as object).length, 1);
    assert.ok(Template.parse('{{ object.spec }}', ['object']).render({ object }).startsWith('{"a":{"a":'));
  });
});

// The metadata-only page of one refused object is read off its text, never parsed: its object's
// identity and the list's resourceVersion and continue token, whatever its labels hold; more
// objects than asked for, or text that is not such a list, say nothing.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { metadataPageHead } from '../../../src/kube/metadata-page-head.js';

const page = (items: unknown[], metadata: Record<string, unknown> = { resourceVersion: '42', continue: 'next' }) =>
  JSON.stringify({ kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1', metadata, items });

describe('metadata page head', () => {
  it("reads the object's identity and the list's token, skipping a megabyte of tiny labels", () => {
    const labels = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, '']));
    const text = page([{ kind: 'PartialObjectMetadata', metadata: { name: 'costly', namespace: 'team', uid: 'u1', resourceVersion: '7', labels, managedFields: [{ manager: 'm' }], annotations: { 'kcp.io/cluster': 'root:a', other: 'x' } } }]);
    assert.deepEqual(metadataPageHead(text, 1), {
      items: [{ name: 'costly', namespace: 'team', uid: 'u1', resourceVersion: '7', annotations: { 'kcp.io/cluster': 'root:a' } }],
      resourceVersion: '42',
      continueToken: 'next',
    });
  });

  it('says the list ended with an empty continue token, and reads the metadata after the items too', () => {
    const text = JSON.stringify({ items: [{ metadata: { name: 'x' } }], metadata: { continue: '', resourceVersion: '9' } });
    assert.deepEqual(metadataPageHead(text, 1), { items: [{ name: 'x' }], resourceVersion: '9', continueToken: undefined });
  });

  it('says nothing of more objects than asked for, of a name no API server sends, or of what is not a list', () => {
    assert.equal(metadataPageHead(page([{ metadata: { name: 'a' } }, { metadata: { name: 'b' } }]), 1), undefined);
    assert.equal(metadataPageHead(page([{ metadata: { name: 'n'.repeat(254) } }]), 1), undefined);
    for (const text of ['', '[]', 'null', '{"items":{}}', '{"items":[1]}', `${page([])} trailing`]) assert.equal(metadataPageHead(text, 1), undefined, text);
  });
});

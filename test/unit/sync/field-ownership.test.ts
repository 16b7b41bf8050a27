// The upgrade of a copy written before relsync applied its copies: the
// fields its old writes owned (manager "unknown", as the API server names a
// request without one) become relsync's apply entry, so that its next apply
// can let go of what the source dropped. Entries are shaped as
// kube-apiserver v1.36 wrote them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { upgradedManagedFields, writtenBeforeApply } from '../../../src/sync/field-ownership.js';

const created = { manager: 'unknown', operation: 'Update', apiVersion: 'v1', time: '2026-12-01T10:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { '.': {}, 'f:a': {}, 'f:b': {} }, 'f:metadata': { 'f:labels': { '.': {}, 'f:relsync.dev/agent': {} } } } };
const operator = { manager: 'operator', operation: 'Update', apiVersion: 'v1', time: '2026-12-01T11:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:z': {} } } };
const status = { manager: 'unknown', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', subresource: 'status', fieldsV1: { 'f:status': {} } };

describe('field ownership upgrade', () => {
  it("folds relsync's old Update entries into its Apply entry, and leaves others' and the status subresource's alone", () => {
    const updated = { ...created, time: '2026-12-02T10:00:00Z', fieldsV1: { 'f:data': { 'f:c': {} } } };
    const out = upgradedManagedFields([created, operator, status, updated], 'relsync-e2e')!;
    assert.deepEqual(out.map((e) => `${e.manager} ${e.operation}${e.subresource ? ` ${e.subresource}` : ''}`), ['operator Update', 'unknown Update status', 'relsync-e2e Apply']);
    assert.deepEqual(out[2]!.fieldsV1, { 'f:data': { '.': {}, 'f:a': {}, 'f:b': {}, 'f:c': {} }, 'f:metadata': { 'f:labels': { '.': {}, 'f:relsync.dev/agent': {} } } });
    assert.equal(out[2]!.apiVersion, 'v1');
    assert.match(out[2]!.time!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'a time the API server accepts (no fraction)');
  });

  it('merges into an Apply entry relsync already has; nothing to do once upgraded, or for a copy never written that way', () => {
    const applied = { manager: 'relsync-e2e', operation: 'Apply', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:x': {} } } };
    const out = upgradedManagedFields([applied, created], 'relsync-e2e')!;
    assert.equal(out.length, 1);
    assert.deepEqual(Object.keys(out[0]!.fieldsV1!['f:data'] as object).sort(), ['.', 'f:a', 'f:b', 'f:x']);
    assert.equal(upgradedManagedFields(out, 'relsync-e2e'), undefined);
    assert.equal(upgradedManagedFields([operator], 'relsync-e2e'), undefined);
    assert.equal(upgradedManagedFields(undefined, 'relsync-e2e'), undefined);
  });

  it('tells copies written before relsync applied them by their old record of copied keys', () => {
    assert.equal(writtenBeforeApply({ 'relsync.dev/copied-labels': '' }), true);
    assert.equal(writtenBeforeApply({ 'relsync.dev/copied-annotations': 'a' }), true);
    assert.equal(writtenBeforeApply({ 'relsync.dev/content-hash': 'h' }), false);
    assert.equal(writtenBeforeApply(undefined), false);
  });
});

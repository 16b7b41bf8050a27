// The upgrade of a copy written before relsync applied its copies: the
// fields its old writes owned (manager "unknown", as the API server names a
// request without one) become relsync's apply entry, so that its next apply
// can let go of what the source dropped. Entries are shaped as
// kube-apiserver v1.36 wrote them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hasFieldsToFold, oldRecordOf, takenOverManagedFields, upgradedManagedFields } from '../../../src/sync/field-ownership.js';

const created = { manager: 'unknown', operation: 'Update', apiVersion: 'v1', time: '2026-12-01T10:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { '.': {}, 'f:a': {}, 'f:b': {} }, 'f:metadata': { 'f:labels': { '.': {}, 'f:relsync.dev/agent': {} } } } };
const old = { labels: [], annotations: [] };
/** When the folded entry is written. */
const AT = Date.parse('2026-12-02T09:00:00.250Z');
const operator = { manager: 'operator', operation: 'Update', apiVersion: 'v1', time: '2026-12-01T11:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:z': {} } } };
const status = { manager: 'unknown', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', subresource: 'status', fieldsV1: { 'f:status': {} } };

describe('field ownership upgrade', () => {
  it("folds relsync's old Update entries into its Apply entry, and leaves others' and the status subresource's alone", () => {
    const updated = { ...created, time: '2026-12-02T10:00:00Z', fieldsV1: { 'f:data': { 'f:c': {} } } };
    const out = upgradedManagedFields([created, operator, status, updated], 'relsync-e2e', AT, old)!;
    assert.deepEqual(out.map((e) => `${e.manager} ${e.operation}${e.subresource ? ` ${e.subresource}` : ''}`), ['operator Update', 'unknown Update status', 'unknown Update', 'relsync-e2e Apply']);
    assert.deepEqual(out[2]!.fieldsV1, { 'f:metadata': { 'f:labels': { '.': {} } } }, 'what relsync cannot tell as its own stays unknown\'s');
    const ours = out[3]!;
    assert.deepEqual(ours.fieldsV1, { 'f:data': { '.': {}, 'f:a': {}, 'f:b': {}, 'f:c': {} }, 'f:metadata': { 'f:labels': { 'f:relsync.dev/agent': {} } } });
    assert.equal(ours.apiVersion, 'v1');
    assert.equal(ours.time, '2026-12-02T09:00:00Z', 'the time given, as the API server accepts it (no fraction)');
  });

  it('merges into an Apply entry relsync already has; nothing to do once upgraded, or for a copy never written that way', () => {
    const applied = { manager: 'relsync-e2e', operation: 'Apply', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:x': {} } } };
    const out = upgradedManagedFields([applied, created], 'relsync-e2e', AT, old)!;
    assert.equal(out.length, 2);
    assert.deepEqual(Object.keys(out[1]!.fieldsV1!['f:data'] as object).sort(), ['.', 'f:a', 'f:b', 'f:x']);
    assert.equal(upgradedManagedFields(out.filter((e) => e.manager !== 'unknown'), 'relsync-e2e', AT, old), undefined);
    assert.equal(upgradedManagedFields([operator], 'relsync-e2e', AT), undefined);
    assert.equal(hasFieldsToFold([operator], 'relsync-e2e'), false);
    assert.equal(hasFieldsToFold([applied, created], 'relsync-e2e', old), true);
    assert.equal(upgradedManagedFields(undefined, 'relsync-e2e', AT), undefined);
  });

  it("folds another writer's \"unknown\" entry only for a copy with the old record, and of its labels and annotations only the recorded keys", () => {
    const webhook = { ...created, fieldsV1: { 'f:metadata': { 'f:labels': { 'f:team': {}, 'f:injected-by-webhook': {} }, 'f:annotations': { 'f:note': {}, 'f:relsync.dev/source-name': {} } }, 'f:data': { 'f:a': {} } } };
    assert.equal(upgradedManagedFields([webhook], 'relsync-e2e', AT), undefined, 'without the old record, an unknown writer is not relsync');
    const out = upgradedManagedFields([webhook], 'relsync-e2e', AT, { labels: ['team'], annotations: [] })!;
    const theirs = out.find((e) => e.manager === 'unknown')!;
    const ours = out.find((e) => e.manager === 'relsync-e2e')!;
    assert.deepEqual(theirs.fieldsV1, { 'f:metadata': { 'f:labels': { 'f:injected-by-webhook': {} }, 'f:annotations': { 'f:note': {} } } });
    assert.deepEqual(ours.fieldsV1, { 'f:metadata': { 'f:labels': { 'f:team': {} }, 'f:annotations': { 'f:relsync.dev/source-name': {} } }, 'f:data': { 'f:a': {} } });
    // relsync's own Update entry (a POST on kcp) is folded whole, record or not.
    const posted = { ...created, manager: 'relsync-e2e' };
    assert.deepEqual(upgradedManagedFields([posted], 'relsync-e2e', AT)!.map((e) => `${e.manager} ${e.operation}`), ['relsync-e2e Apply']);
  });

  it('reads the old record of copied keys', () => {
    assert.deepEqual(oldRecordOf({ 'relsync.dev/copied-labels': 'a,b', 'relsync.dev/copied-annotations': '' }), { labels: ['a', 'b'], annotations: [] });
    assert.deepEqual(oldRecordOf({ 'relsync.dev/copied-annotations': 'x' }), { labels: [], annotations: ['x'] });
    assert.equal(oldRecordOf({ 'relsync.dev/content-hash': 'h' }), undefined);
    assert.equal(oldRecordOf(undefined), undefined);
  });
});

describe('field ownership taken over at adoption', () => {
  const applied = { manager: 'relsync-e2e', operation: 'Apply', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:v': {}, 'f:extra': {} }, 'f:metadata': { 'f:labels': { 'f:relsync.dev/agent': {} } } } };
  const before = { manager: 'api-syncagent', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { '.': {}, 'f:v': {}, 'f:extra': {}, 'f:provider': {} }, 'f:metadata': { 'f:annotations': { '.': {}, 'f:relsync.dev/adopt': {} } } } };

  it("takes relsync's applied fields from every other entry, and keeps what relsync does not copy theirs", () => {
    const out = takenOverManagedFields([before, applied, status], 'relsync-e2e')!;
    assert.deepEqual(out.map((e) => e.manager), ['api-syncagent', 'relsync-e2e', 'unknown']);
    assert.deepEqual(out[0]!.fieldsV1, { 'f:data': { '.': {}, 'f:provider': {} }, 'f:metadata': { 'f:annotations': { '.': {}, 'f:relsync.dev/adopt': {} } } });
    assert.deepEqual(out[2], status, 'the status subresource\'s entry is not the copy\'s');
  });

  it('drops an entry left with nothing, and does nothing when there is nothing to take', () => {
    const only = { ...before, fieldsV1: { 'f:data': { 'f:v': {} } } };
    assert.deepEqual(takenOverManagedFields([only, applied], 'relsync-e2e')!.map((e) => e.manager), ['relsync-e2e']);
    assert.equal(takenOverManagedFields([operator, applied], 'relsync-e2e'), undefined, 'another manager\'s other fields');
    assert.equal(takenOverManagedFields([before], 'relsync-e2e'), undefined, 'nothing applied yet');
    // A field the other manager owns whole (atomic) and relsync applies part of goes whole.
    const atomic = { ...before, fieldsV1: { 'f:data': {} } };
    assert.deepEqual(takenOverManagedFields([atomic, applied], 'relsync-e2e')!.map((e) => e.manager), ['relsync-e2e']);
  });
});

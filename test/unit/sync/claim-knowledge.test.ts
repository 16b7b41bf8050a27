import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClaimKnowledge, type DeferredCopy } from '../../../src/sync/claim-knowledge.js';

const copy = (claimants: string, name: string): DeferredCopy => ({
  claimants,
  type: { group: '', version: 'v1', resource: 'configmaps', namespaced: true },
  destination: { cluster: 'service', group: '', resource: 'configmaps', namespace: 'copies', name },
  source: { cluster: claimants, group: '', resource: 'configmaps', namespace: 'ns', name },
} as DeferredCopy);

describe('what the store knows of claims', () => {
  it('knows no cluster until a sweep completed it, and hands over only the copies of completed clusters', () => {
    const claims = new ClaimKnowledge(false);
    assert.equal(claims.complete('tenant-a'), false);
    claims.defer(copy('tenant-a', 'x'));
    claims.defer(copy('tenant-a', 'x')); // the same copy twice is one
    claims.defer(copy('tenant-b', 'y'));
    claims.markComplete(['tenant-a']);
    assert.equal(claims.complete('tenant-a'), true);
    assert.deepEqual(claims.takeDecidable().copies.map((c) => c.destination.name), ['x']);
    assert.deepEqual(claims.takeDecidable().copies, [], 'handed over once');
    claims.markComplete(['tenant-b']);
    assert.deepEqual(claims.takeDecidable().copies.map((c) => c.destination.name), ['y']);
  });

  it('takes a primary\'s stored relations for its claims only if they were written since the store was opened', () => {
    const claims = new ClaimKnowledge(false, 10, 10, '2026-12-06T02:00:00.000Z');
    assert.equal(claims.writtenSinceOpened(undefined), false, 'no record');
    assert.equal(claims.writtenSinceOpened({ lastSyncedAt: null }), false, 'never synced');
    assert.equal(claims.writtenSinceOpened({ lastSyncedAt: '2026-12-01T00:00:00.000Z' }), false, 'an older store\'s');
    assert.equal(claims.writtenSinceOpened({ lastSyncedAt: '2026-12-06T02:00:01.000Z' }), true);
    assert.equal(new ClaimKnowledge(true).writtenSinceOpened(undefined), true, 'a trusted store');
  });

  it('trusts the store from the start without a startup sweep', () => {
    assert.equal(new ClaimKnowledge(true).complete('anything'), true);
  });

  it('remembers a bounded number of copies and counts the rest for a later sweep', () => {
    const claims = new ClaimKnowledge(false, 2);
    for (const name of ['a', 'b', 'c', 'd']) claims.defer(copy('tenant-a', name));
    claims.markComplete(['tenant-a']);
    const { copies, overflowed } = claims.takeDecidable();
    assert.equal(copies.length, 2);
    assert.equal(overflowed, 2);
    assert.equal(claims.takeDecidable().overflowed, 0);
  });
});

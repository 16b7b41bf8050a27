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

  it('hands over one unbound workspace\'s copies without the overflow count, which stays for the sweep; a workspace that binds again is not complete', () => {
    const claims = new ClaimKnowledge(false, 3);
    for (const name of ['a', 'b']) claims.defer(copy('ws-a', name));
    claims.defer(copy('ws-b', 'c'));
    claims.defer(copy('ws-b', 'd')); // over maxDeferred: counted
    claims.markComplete(['ws-a', 'ws-b']);
    const unbound = claims.takeDecidable('ws-a');
    assert.deepEqual(unbound.copies.map((c) => c.destination.name), ['a', 'b'], 'only the unbound workspace\'s copies');
    assert.equal(unbound.overflowed, 0, 'the overflow is the sweep\'s to hear: it alone finds those copies, by listing');
    const sweep = claims.takeDecidable();
    assert.deepEqual(sweep.copies.map((c) => c.destination.name), ['c']);
    assert.equal(sweep.overflowed, 1);
    claims.forget('ws-a');
    assert.equal(claims.complete('ws-a'), false, 'bound again: objects kcp kept may claim what the store does not know');
    claims.defer(copy('ws-a', 'e'));
    assert.deepEqual(claims.takeDecidable('ws-a').copies, [], 'left in place until a sweep completes it again');
  });
});

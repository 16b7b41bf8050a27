// The replica identity survives a restart on the same machine only: a volume
// that moves to another node (a rescheduled StatefulSet pod, the old one maybe
// still running on a partitioned node) starts a new identity, which waits for
// the old one's Leases to expire instead of taking them at once (issue #35, point 6).
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { acquireReplicaLock, StoreInUseError } from '../../../src/store/replica-lock.js';

describe('replica lock', () => {
  const store = () => join(mkdtempSync(join(tmpdir(), 'relsync-replica-')), 'relsync.db');

  it('keeps the identity across restarts on the same machine boot', () => {
    const path = store();
    const first = acquireReplicaLock(path, 'boot-1');
    first.release();
    const again = acquireReplicaLock(path, 'boot-1');
    again.release();
    assert.equal(again.identity, first.identity);
  });

  it('starts a new identity on another machine (or after a reboot), with the same volume', () => {
    const path = store();
    const first = acquireReplicaLock(path, 'node-a-boot');
    first.release();
    const moved = acquireReplicaLock(path, 'node-b-boot');
    moved.release();
    assert.notEqual(moved.identity, first.identity);
  });

  it('refuses a second process on the same store', () => {
    const path = store();
    const held = acquireReplicaLock(path, 'boot-1');
    try {
      assert.throws(() => acquireReplicaLock(path, 'boot-1'), StoreInUseError);
    } finally {
      held.release();
    }
  });
});

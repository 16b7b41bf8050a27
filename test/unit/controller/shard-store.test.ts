// A shard's store is resumed only when the Lease's history proves no other
// replica held the shard since this one did (issue #35, point 9): a restart
// costs a relist, not a rebuild, and never resumes a store another replica's
// holding made stale.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { shardStoreFor } from '../../../src/controller/shard-term.js';

describe('a shard store across takes', () => {
  const fresh = () => {
    const path = join(mkdtempSync(join(tmpdir(), 'relsync-shard-store-')), 'relsync.shard-0-of-2.abc.db');
    writeFileSync(path, 'a store');
    return path;
  };

  it('is fresh at the first take, and resumed when taken back with no take by another in between (after a crash, or a clean release)', () => {
    const path = fresh();
    assert.equal(shardStoreFor(path, 'r1', { leaseUid: 'u1', transitionsBefore: undefined, transitionsAfter: 0 }), 'fresh');
    assert.equal(existsSync(path), false, 'a store of unknown origin is dropped');
    writeFileSync(path, 'the store of that holding');
    // Killed, or released on a clean stop: the Lease keeps its transitions; the take back adds one.
    assert.equal(shardStoreFor(path, 'r1', { leaseUid: 'u1', transitionsBefore: 0, transitionsAfter: 1 }), 'resumed');
    assert.equal(existsSync(path), true);
    assert.equal(shardStoreFor(path, 'r1', { leaseUid: 'u1', transitionsBefore: 1, transitionsAfter: 2 }), 'resumed');
  });

  it('is built afresh when another replica took the shard since, the Lease was made again, or the identity is another', () => {
    for (const [why, identity, take] of [
      ['another replica took it since', 'r1', { leaseUid: 'u1', transitionsBefore: 2, transitionsAfter: 3 }],
      ['the Lease was deleted and made again', 'r1', { leaseUid: 'u2', transitionsBefore: 0, transitionsAfter: 1 }],
      ['another identity (a volume moved to another machine)', 'r9', { leaseUid: 'u1', transitionsBefore: 0, transitionsAfter: 1 }],
    ] as const) {
      const path = fresh();
      shardStoreFor(path, 'r1', { leaseUid: 'u1', transitionsBefore: undefined, transitionsAfter: 0 });
      writeFileSync(path, 'the store of that holding');
      assert.equal(shardStoreFor(path, identity, take), 'fresh', why);
      assert.equal(existsSync(path), false, `${why}: dropped`);
    }
  });
});

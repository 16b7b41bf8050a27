// Each replica's share of the shards and what it takes or gives up, from what
// every replica sees alike: balanced to within one shard, never a live
// replica's shard taken, and replicas that start together trying different
// shards first.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { balance, shareOf } from '../../../src/controller/shard-balance.js';

describe('shard balance', () => {
  it('gives every replica a share within one shard of every other, summing to all shards', () => {
    for (let shards = 1; shards <= 12; shards++) {
      for (let replicas = 1; replicas <= 7; replicas++) {
        const members = Array.from({ length: replicas }, (_, i) => `replica-${String.fromCharCode(97 + i)}`);
        const shares = members.map((m) => shareOf(shards, members, m));
        assert.equal(shares.reduce((a, b) => a + b, 0), shards, `${shards} shards over ${replicas}`);
        assert.ok(Math.max(...shares) - Math.min(...shares) <= 1, `${shards} over ${replicas}: ${shares.join(',')}`);
      }
    }
  });

  it('counts this replica among the members even before its member Lease is seen', () => {
    assert.equal(shareOf(6, ['a', 'b'], 'c'), 2);
  });

  it('takes only free shards, up to its share, and gives up the surplus from the top', () => {
    const view = { members: ['a', 'b', 'c'], holders: ['a', 'a', 'a', undefined, 'b', undefined] };
    assert.deepEqual(balance(view, 'a', new Set([0, 1, 2])), { share: 2, take: [], giveUp: [2] });
    const c = balance(view, 'c', new Set());
    assert.equal(c.share, 2);
    assert.deepEqual([...c.take].sort(), [3, 5]);
    assert.ok(!c.take.some((s) => view.holders[s] !== undefined), 'no held shard is taken');
  });

  it('never takes a live replica\'s shard, even below its share', () => {
    const view = { members: ['a', 'b'], holders: ['a', 'a', 'a', 'a', 'a', 'a'] };
    assert.deepEqual(balance(view, 'b', new Set()), { share: 3, take: [], giveUp: [] });
  });

  it('lets replicas that start together try different shards first', () => {
    const view = { members: ['a', 'b', 'c'], holders: Array<string | undefined>(6).fill(undefined) };
    const first = ['a', 'b', 'c'].map((m) => balance(view, m, new Set()).take[0]);
    assert.equal(new Set(first).size, 3, `first choices ${first.join(',')}`);
  });
});

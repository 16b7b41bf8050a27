import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ExpiringMap } from '../../../src/util/expiring-map.js';
import { FakeClock } from '../../harness/fake-clock.js';

describe('expiring map', () => {
  it('forgets an entry when it expires, and the oldest when full', () => {
    const map = new ExpiringMap<string, number>(2, new FakeClock());
    map.set('a', 1, 1000, 0);
    assert.equal(map.get('a', 999), 1);
    assert.equal(map.get('a', 1000), undefined, 'expired');
    map.set('a', 1, 1000, 0);
    map.set('b', 2, 1000, 0);
    map.set('a', 3, 1000, 1);
    map.set('c', 4, 1000, 1);
    assert.equal(map.get('b', 2), undefined, 'the oldest (b; a was set again since) went when c came');
    assert.deepEqual([map.get('a', 2), map.get('c', 2)], [3, 4]);
    map.delete('a');
    assert.equal(map.get('a', 2), undefined);
  });

  it('reads its clock where no time is given', async () => {
    const clock = new FakeClock();
    const map = new ExpiringMap<string, number>(2, clock);
    map.set('a', 1, 1000);
    await clock.advance(999);
    assert.equal(map.get('a'), 1);
    await clock.advance(1);
    assert.equal(map.get('a'), undefined, 'expired on the clock it was given');
  });
});

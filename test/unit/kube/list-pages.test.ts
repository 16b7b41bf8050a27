// A LIST is taken in pages sized by bytes: the API server counts objects,
// so without this 500 ConfigMaps of 1 MiB would be one 500 MiB answer.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextPageLimit, PAGE_TARGET_SIZE } from '../../../src/kube/resource-client.js';

describe('LIST page size', () => {
  it('asks for as many objects as fit in the target size, by the objects seen so far', () => {
    assert.equal(nextPageLimit(20, 20 * 2_000), 500, 'small objects: the usual 500');
    assert.equal(nextPageLimit(20, 20 * 1024 * 1024), 4, '1 MiB objects: four per page');
    assert.equal(nextPageLimit(1, 3 * PAGE_TARGET_SIZE), 1, 'never fewer than one');
    assert.equal(nextPageLimit(0, 0), 500, 'an empty page says nothing about sizes');
  });

  it('keeps every page near the target, whatever the mix', () => {
    // 100 small objects then big ones: the average lags, so a page may overshoot, but by at most
    // the page's count times the size of one object, and the limit falls as the big ones arrive.
    let seen = 100;
    let size = 100 * 1_000;
    let worst = 0;
    for (let page = 0; page < 20; page++) {
      const limit = nextPageLimit(seen, size);
      const pageSize = limit * 1024 * 1024;
      worst = Math.max(worst, page > 2 ? pageSize : 0);
      seen += limit;
      size += pageSize;
    }
    assert.ok(worst <= 2 * PAGE_TARGET_SIZE, `after the first pages, at most twice the target (${worst})`);
  });
});

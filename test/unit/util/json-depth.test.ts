import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nestingDepth } from '../../../src/util/json-depth.js';

describe('json-depth', () => {
  it('counts levels of arrays and objects, the value itself as one', () => {
    assert.equal(nestingDepth('x'), 0);
    assert.equal(nestingDepth(null), 0);
    assert.equal(nestingDepth({}), 1);
    assert.equal(nestingDepth([]), 1);
    assert.equal(nestingDepth({ a: 1, b: { c: [1, { d: 'x' }] } }), 4);
    assert.equal(nestingDepth([[[]], {}]), 3);
  });

  it('stops past the limit, at any depth, without recursion', () => {
    const value = JSON.parse(`${'['.repeat(200_000)}${']'.repeat(200_000)}`) as unknown;
    assert.equal(nestingDepth(value), 200_000);
    assert.equal(nestingDepth(value, 99), 100);
    assert.equal(nestingDepth({ a: { b: {} } }, 3), 3, 'at the limit is not past it');
    assert.equal(nestingDepth({ a: { b: {} } }, 2), 3);
  });
});

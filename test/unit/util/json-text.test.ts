import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonText, sortedJsonText } from '../../../src/util/json-text.js';

/** `{"a":{"a":…1…}}`, `depth` objects deep, as text. */
function deepText(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

/** The same, parsed (JSON.parse does not recurse). */
function deep(depth: number): unknown {
  return JSON.parse(deepText(depth));
}

const samples: unknown[] = [
  null, true, 0, -1.5, 'x', '', 'ü "quoted" \n\u2028', [], {}, [1, 'two', null, [3], { four: 4 }],
  { b: 1, a: { d: [1, { z: true, y: null }], c: 'x' }, e: [] },
  { __proto__key: 1, 'a.b/c': { '': 2 } },
];

describe('json-text', () => {
  it("jsonText is JSON.stringify's text", () => {
    for (const v of samples) assert.equal(jsonText(v), JSON.stringify(v));
  });

  it('sortedJsonText sorts keys at every level and leaves undefined members out (an array\'s are null)', () => {
    assert.equal(sortedJsonText({ b: 1, a: { d: 2, c: [3, undefined, { y: 1, x: undefined }] } }), '{"a":{"c":[3,null,{"y":1}],"d":2},"b":1}');
    for (const v of samples) assert.deepEqual(JSON.parse(sortedJsonText(v)), v);
    assert.equal(sortedJsonText({ b: 1, a: 2 }), sortedJsonText({ a: 2, b: 1 }));
  });

  it('both write a value nested 100,000 levels deep, where JSON.stringify overflows the stack', () => {
    const value = deep(100_000);
    assert.throws(() => JSON.stringify(value), RangeError);
    assert.equal(jsonText(value), deepText(100_000));
    assert.equal(sortedJsonText(value), deepText(100_000));
    // The same text as the native serializer's where it does not overflow.
    assert.equal(jsonText(deep(1_000)), JSON.stringify(deep(1_000)));
  });
});

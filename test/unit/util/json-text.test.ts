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

  it('sortedJsonText is the sorted text of a plain recursive serializer for every shape a leaf fast path could get wrong', () => {
    // Integer-like keys ("10" sorts before "9" by code unit, but objects list "9" first), undefined
    // members and elements, NaN and -0, lone surrogates, sparse arrays, keys already in order.
    const shapes: unknown[] = [
      { 10: 'a', 9: 'b', x: 1 }, { a: 1, b: 2, c: 3 }, { c: 1, b: 2, a: 3 }, { a: undefined, b: 1 }, { b: undefined, a: 1 },
      [1, undefined, NaN, -0, Infinity, '\ud800', 'x\udc00y'], { a: NaN, b: -0, c: '\ud800' }, [, 1, , 2], // eslint-disable-line no-sparse-arrays
      { '': 1, ' ': 2, A: 3, a: 4, é: 5, '\u{1f600}': 6, '\uffff': 7 }, Array.from({ length: 30_000 }, (_, i) => `name-${i}`),
      { tls: Array.from({ length: 100 }, (_, i) => ({ name: `s${i}` })), z: { 2: true, 1: false } },
    ];
    for (let seed = 1; seed <= 300; seed++) shapes.push(randomValue(seed));
    for (const v of shapes) assert.equal(sortedJsonText(v), reference(v), JSON.stringify(v)?.slice(0, 200));
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

/** Sorted JSON the plain way (recursion, one call per member): the text sortedJsonText must match. */
function reference(v: unknown): string {
  if (Array.isArray(v)) return `[${Array.from(v, (e: unknown) => (e === undefined ? 'null' : reference(e))).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v).filter((k) => (v as Record<string, unknown>)[k] !== undefined).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${keys.map((k) => `${JSON.stringify(k)}:${reference((v as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** A small random JSON-like value, the same for the same seed (a linear congruential generator). */
function randomValue(seed: number): unknown {
  let state = seed;
  const next = (n: number): number => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state % n;
  };
  const keys = ['a', 'b', 'B', '0', '1', '10', '9', '-1', '01', '', 'ä', '\ud800', 'z'];
  const leaf = (): unknown => [null, true, false, 0, -0, NaN, 1.5, 'x', '\ud800', undefined][next(10)];
  const make = (depth: number): unknown => {
    const kind = depth > 3 ? 0 : next(3);
    if (kind === 0) return leaf();
    if (kind === 1) return Array.from({ length: next(5) }, () => make(depth + 1));
    const object: Record<string, unknown> = {};
    for (let i = next(6); i > 0; i--) object[keys[next(keys.length)]!] = make(depth + 1);
    return object;
  };
  return make(0);
}

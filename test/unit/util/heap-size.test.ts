// What a JSON text says it will take once parsed (parsedBytesAtMost), against what V8 holds:
// never less for the shapes a tenant can choose, and structure inside strings is not counted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { approximateHeapBytes, parsedBytesAtMost } from '../../../src/util/heap-size.js';

describe('parsedBytesAtMost', () => {
  it('counts every value of many tiny ones, whatever their shape', () => {
    for (const text of ['[{},{},{}]', '[[],[],[]]', '[0,0,0]', '{"a":{},"b":[],"c":""}', '[[[[]]]]']) {
      const parsed = approximateHeapBytes(JSON.parse(text));
      assert.ok(parsedBytesAtMost(text) >= parsed, `${text}: ${parsedBytesAtMost(text)} < ${parsed}`);
    }
  });

  it('says a long string costs its length, however many brackets, commas and quotes it holds', () => {
    const inside = '{[,:\\"'.repeat(100_000);
    const text = JSON.stringify({ data: inside });
    assert.ok(parsedBytesAtMost(text) < text.length + 64 * 10, String(parsedBytesAtMost(text)));
  });

  it('ends a string only at a quote not escaped, and counts what follows', () => {
    // The string holds `\\` then ends; the array after it counts.
    const text = '{"a":"x\\\\","b":[{},{}]}';
    assert.equal(JSON.parse(text).a, 'x\\');
    assert.equal(parsedBytesAtMost(text), text.length + 64 * 8);
  });

  it('counts text beyond Latin-1 twice, as V8 holds it', () => {
    assert.equal(parsedBytesAtMost('"ż"'), 6);
  });

  it('stops at a string that never closes', () => {
    assert.equal(parsedBytesAtMost('[{},"{{{{'), 9 + 64 * 3);
  });
});

// What a JSON text says it will take once parsed (parsedBytesAtMost), against what V8 holds:
// never less for the shapes a tenant can choose, and structure inside strings is not counted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { approximateHeapBytes, parsedBytesAtMost, parsedBytesOver } from '../../../src/util/heap-size.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The heap V8 holds for the parsed text, between two full collections. */
function heldOnceParsed(text: string): number {
  gc();
  const before = process.memoryUsage().heapUsed;
  const value: unknown = JSON.parse(text);
  gc();
  const held = process.memoryUsage().heapUsed - before;
  assert.notEqual(value, undefined);
  return held;
}

const key = (i: number) => `"k${i.toString(36).padStart(5, '0')}"`;
const MiB = 1024 * 1024;

describe('parsedBytesAtMost', () => {
  it("says no less than V8 holds for the shapes it says least of (4 MiB each)", () => {
    const shapes: Record<string, string> = {
      'empty objects': `[${'{},'.repeat((4 * MiB) / 3)}{}]`,
      'nested arrays': '['.repeat(2 * MiB) + ']'.repeat(2 * MiB),
      'objects of one distinct key each': `[${Array.from({ length: (4 * MiB) / 14 }, (_, i) => `{${key(i)}:1}`).join(',')}]`,
      'objects of distinct keys': `{${Array.from({ length: (4 * MiB) / 13 }, (_, i) => `${key(i)}:{}`).join(',')}}`,
      'escaped text beyond Latin-1': JSON.stringify({ data: `${'a'.repeat(4 * MiB)}\u0100` }).replace('\u0100', '\\u0100'),
    };
    for (const [shape, text] of Object.entries(shapes)) {
      const held = heldOnceParsed(text);
      assert.ok(parsedBytesAtMost(text) >= held, `${shape}: says ${parsedBytesAtMost(text)} bytes, V8 holds ${held}`);
    }
  });

  it('scans only texts long enough to pass the bound', () => {
    const text = `[${'{},'.repeat(1000)}{}]`;
    assert.equal(parsedBytesOver(text, text.length * 66), undefined, 'too short to be over: not scanned');
    assert.equal(parsedBytesOver(text, 1000), parsedBytesAtMost(text));
  });

  it('says a text is over the bound whenever parsedBytesAtMost says so, however short (a GET and a LIST page of one object decide alike)', () => {
    // 1.75 MiB of empty arrays: says ~76 MiB, 43 times its length (a real custom resource, test/e2e/parse-cap.test.ts).
    const object = `{"spec":[${'[],'.repeat(611_000)}[]]}`;
    assert.ok(parsedBytesAtMost(object) > 72 * MiB);
    assert.equal(parsedBytesOver(object, 72 * MiB), parsedBytesAtMost(object));
    for (const text of [',,,,,,,,', '[[[[', '"\u0100",,,,', ':::']) {
      const said = parsedBytesAtMost(text);
      assert.equal(parsedBytesOver(text, said - 1), said, `${text}: over a bound just below what it says`);
    }
  });

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

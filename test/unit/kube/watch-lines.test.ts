// A watch's answer as lines, from an API server that may be a tenant's own: lines split across
// chunks as the network cuts them, CRLF, a last line without a newline, and a line that never
// ends, which is dropped at its limit instead of being held whole (issue #36, point 9).
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { linesOf, WatchLineTooLongError } from '../../../src/kube/resource-client.js';

const read = async (chunks: string[], max = 1024): Promise<string[]> => {
  const out: string[] = [];
  for await (const line of linesOf(Readable.from(chunks.map((c) => Buffer.from(c))), max, 'test')) out.push(line);
  return out;
};

describe('watch lines', () => {
  it('splits lines however the chunks cut them', async () => {
    assert.deepEqual(await read(['{"a":', '1}\n{"b"', ':2}\r\n', '\n{"c":3}']), ['{"a":1}', '{"b":2}', '', '{"c":3}']);
    assert.deepEqual(await read(['x\ny\nz\n']), ['x', 'y', 'z']);
    const e = Buffer.from('é\n');
    const split: string[] = [];
    for await (const line of linesOf(Readable.from([e.subarray(0, 1), e.subarray(1)]), 1024, 'test')) split.push(line);
    assert.deepEqual(split, ['é'], 'a character split across chunks is whole');
  });

  it('drops a line longer than its limit, within a chunk or across many', async () => {
    await assert.rejects(read(['ok\n', 'x'.repeat(2000), '\n'], 1024), WatchLineTooLongError);
    const endless = Array.from({ length: 100 }, () => 'y'.repeat(100));
    await assert.rejects(read(endless, 1024), WatchLineTooLongError);
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const line of linesOf(Readable.from([Buffer.from('first\n'), ...endless.map((c) => Buffer.from(c))]), 1024, 'test')) seen.push(line);
    }, WatchLineTooLongError);
    assert.deepEqual(seen, ['first'], 'the lines before it were handed on');
  });
});

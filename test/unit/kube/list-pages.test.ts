// A LIST is taken in pages sized by bytes: the API server counts objects,
// so without this 500 ConfigMaps of 1 MiB would be one 500 MiB answer.
// (Against a real API server, with the answers dropped for their size:
// test/e2e/list-pages.test.ts.)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AnswerTooLargeError, type Connection } from '../../../src/kube/connection.js';
import { EndlessListError, nextPageLimit, PAGE_TARGET_SIZE, ResourceClient } from '../../../src/kube/resource-client.js';

const MiB = 1024 * 1024;

describe('LIST page size', () => {
  it('asks for as many objects as the last page says fit in the target size', () => {
    assert.equal(nextPageLimit(500, 500, 500 * 2_000), 500, 'small objects: the usual 500');
    assert.equal(nextPageLimit(20, 20, 20 * MiB), 4, '1 MiB objects: four per page');
    assert.equal(nextPageLimit(4, 1, 3 * PAGE_TARGET_SIZE), 1, 'never fewer than one');
  });

  it('grows by doubling at most, so that small objects first cannot make the next page huge', () => {
    assert.equal(nextPageLimit(20, 20, 20 * 100), 40);
    assert.equal(nextPageLimit(7, 7, 7 * 100), 14, 'after a dropped answer, back up slowly');
    assert.equal(nextPageLimit(400, 0, 0), 500, 'an empty page (a label filter) says nothing about sizes');
    // 10,000 tiny objects, then 1 MiB ones: the limit never jumps past twice the last page.
    let limit = 20;
    const sizes = [...Array(10_000).fill(200), ...Array(200).fill(MiB)] as number[];
    let at = 0;
    let biggest = 0;
    while (at < sizes.length) {
      const page = sizes.slice(at, at + limit);
      const size = page.reduce((a, b) => a + b, 0);
      biggest = Math.max(biggest, size);
      at += page.length;
      const next = nextPageLimit(limit, page.length, size);
      assert.ok(next <= 2 * limit, `from ${limit} to ${next}: at most twice`);
      limit = next;
    }
    // The page that crosses from small to big holds up to 500 big ones: that answer is what
    // pages() drops at PAGE_MAX_BYTES and asks again smaller.
    assert.ok(biggest > 16 * MiB);
    assert.equal(nextPageLimit(500, 500, 500 * MiB), 4, 'one big page and the limit is small at once');
  });

  it('gives up on one object too large to read, instead of asking for it again and again', async () => {
    // An API server (a tenant's own) whose every answer is over the size relsync reads, whatever the limit.
    const limits: number[] = [];
    const connection = {
      request: async (_method: string, path: string, options: { query?: { limit?: number } }) => {
        limits.push(options.query?.limit ?? 0);
        if (limits.length > 20) throw new Error('asked more than 20 times');
        throw new AnswerTooLargeError('GET', path, 64 * MiB);
      },
    } as unknown as Connection;
    const client = new ResourceClient(connection, { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true });
    await assert.rejects(async () => {
      for await (const page of client.pages({})) void page;
    }, AnswerTooLargeError);
    assert.equal(limits.at(-1), 1, 'down to one object a page');
    assert.ok(limits.length < 10, `then it stopped (${limits.length} requests: ${limits.join(', ')})`);
  });

  it('ends a LIST whose every page brings another continue token, after limits.listPages pages', async () => {
    // A tenant's own API server: a page of one object and a new token, for ever.
    let asked = 0;
    const connection = {
      name: 'tenant-a',
      request: async () => ({ metadata: { continue: `token-${++asked}` }, items: [{ metadata: { name: `o${asked}` } }] }),
    } as unknown as Connection;
    const client = new ResourceClient(connection, { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true }, undefined, 50);
    let seen = 0;
    await assert.rejects(async () => {
      for await (const page of client.pages({})) seen += page.items.length;
    }, (err: Error) => err instanceof EndlessListError && /not complete after 50 pages \(50 objects; limits\.listPages is 50\)/.test(err.message));
    assert.equal(asked, 50);
    assert.equal(seen, 50);
  });

  it('ends a LIST at a page of more than 500 objects with more to come; a server without paging answers one page of all', async () => {
    const type = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
    const items = (n: number) => Array.from({ length: n }, (_, i) => ({ metadata: { name: `o${i}` } }));
    const flooding = { name: 'tenant-a', request: async () => ({ metadata: { continue: 'more' }, items: items(501) }) } as unknown as Connection;
    await assert.rejects(async () => {
      for await (const page of new ResourceClient(flooding, type).pages({})) void page;
    }, (err: Error) => err instanceof EndlessListError && /a page of 501 objects \(asked for at most 20\), and more were to come/.test(err.message));
    const unpaged = { name: 'aggregated', request: async () => ({ metadata: {}, items: items(2_000) }) } as unknown as Connection;
    let seen = 0;
    for await (const page of new ResourceClient(unpaged, type).pages({})) seen += page.items.length;
    assert.equal(seen, 2_000);
  });
});

// A read of an object that does not exist is an answer, not a failure: ResourceClient.get and
// getMetadata take the API server's NotFound about that very object as "absent" without making an
// ApiError of it (a tenant's wildcard of names that never exist costs thousands of them). Anything
// else that is no proof of absence still fails the read, against a local HTTP server.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { answersObjectNotFound, ApiError, isObjectNotFound } from '../../../src/kube/api-error.js';
import { Connection, MAX_ERROR_BYTES } from '../../../src/kube/connection.js';
import { ResourceClient } from '../../../src/kube/resource-client.js';
import { heavyTurns } from '../../../src/util/heavy-turns.js';
import { localKubeconfig } from '../../harness/list-server.js';

const configMaps = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const notFound = (name?: string) => JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', message: `configmaps "${name ?? ''}" not found`, details: name === undefined ? {} : { name, kind: 'configmaps' }, code: 404 });

/** A Status whose message is padded with spaces to `bytes` in all. */
function padTo(bytes: number, status: string): string {
  const parsed = JSON.parse(status) as { message: string };
  return JSON.stringify({ ...parsed, message: parsed.message + ' '.repeat(bytes - Buffer.byteLength(status)) });
}

/** Answers by the object's name: `status body`. */
const answers: Record<string, [number, string]> = {
  absent: [404, notFound('absent')],
  'named-other': [404, notFound('someone-else')],
  'path-not-served': [404, notFound()],
  'plain-404': [404, '404 page not found\n'],
  'not-a-status': [404, JSON.stringify({ kind: 'ConfigMap', reason: 'NotFound', details: { name: 'not-a-status' } })],
  empty: [200, ''],
  null: [200, 'null'],
  list: [200, '[]'],
  number: [200, '0'],
  bare: [200, '{}'],
  there: [200, JSON.stringify({ metadata: { name: 'there', namespace: 'a' }, data: { k: 'v' } })],
  // A tenant's API server's 404 padded to the most an error's answer is read (MAX_ERROR_BYTES).
  padded: [404, padTo(MAX_ERROR_BYTES, notFound('padded'))],
};

describe('reads of absent objects', () => {
  let server: http.Server;
  let client: ResourceClient;

  before(async () => {
    server = http.createServer((req, res) => {
      const [status, body] = answers[req.url!.split('?')[0]!.split('/').pop()!] ?? [500, 'no such case'];
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const kubeconfig = localKubeconfig(server, 'relsync-absent-reads-');
    client = new ResourceClient(new Connection({ name: 'c', kubeconfig }), configMaps);
  });
  after(() => server.close());

  it("reads a large error answer at a heavy turn: a tenant's padded 404s are not parsed back to back", async () => {
    const before = heavyTurns.turnsGranted;
    assert.equal(await client.get('a', 'padded'), undefined);
    assert.equal(heavyTurns.turnsGranted, before + 1, 'one turn for the 64 KiB answer');
    await client.get('a', 'absent');
    assert.equal(heavyTurns.turnsGranted, before + 1, 'a small one goes on at once');
  });

  it("answers undefined for the API server's NotFound about the object read, with and without its content", async () => {
    assert.equal(await client.get('a', 'absent'), undefined);
    assert.equal(await client.getMetadata('a', 'absent'), undefined);
    assert.deepEqual((await client.get('a', 'there'))?.data, { k: 'v' });
  });

  it('fails on anything that is no proof the object is absent: a NotFound of another name or of the path, a plain 404, an empty answer', async () => {
    for (const name of ['named-other', 'path-not-served', 'plain-404', 'not-a-status']) {
      await assert.rejects(client.get('a', name), (err: unknown) => err instanceof ApiError && err.statusCode === 404, name);
      await assert.rejects(client.getMetadata('a', name), ApiError, name);
    }
    await assert.rejects(client.get('a', 'empty'), /an empty answer/);
    for (const name of ['null', 'list', 'number', 'bare']) {
      await assert.rejects(client.get('a', name), /the answer (is not an object|has no metadata)/, name);
      await assert.rejects(client.getMetadata('a', name), /the answer (is not an object|has no metadata)/, name);
    }
  });

  it('says "absent" exactly where isObjectNotFound says it of the ApiError made of the answer', () => {
    const more: Array<[number, string]> = [[500, notFound('absent')], [404, '{"kind":"Status","reason":"NotFound","details":{"name":"absent"}}'], [404, 'null'], [404, '{"kind":"Status","reason":"Not Found!","details":{"name":"absent"}}']];
    for (const [status, body] of [...Object.values(answers), ...more]) {
      for (const name of ['absent', 'named-other', '']) {
        assert.equal(answersObjectNotFound(status, body, name), isObjectNotFound(new ApiError('GET', `/api/v1/namespaces/a/configmaps/${name}`, status, body), name), `${status} ${body} ${name}`);
      }
    }
  });
});

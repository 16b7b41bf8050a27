// Credentials as a request sees them: kubectl's and client-node's spellings
// of a token file, trimmed and read again; basic auth as a header; a refresh
// that started before a 401 is not kept; a 401 right after a refresh does not
// reload again. No API server is needed: only what would be sent.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Credentials } from '../../../src/kube/credentials.js';
import { clockReading } from '../../harness/fake-clock.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-credentials-'));

function kubeconfig(name: string, user: Record<string, unknown>): string {
  const path = join(dir, `${name}.kubeconfig`);
  writeFileSync(path, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
    clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:6443/' } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
  }));
  return path;
}

describe('credentials', () => {
  for (const spelling of ['tokenFile', 'token-file']) {
    it(`reads a token file given as ${spelling}, trimmed, and again after each refresh`, async () => {
      const file = join(dir, `${spelling}.token`);
      writeFileSync(file, 'first\n');
      let now = 0;
      const credentials = new Credentials({ kubeconfig: kubeconfig(spelling, { [spelling]: file }) }, 30_000, clockReading(() => now));
      assert.equal(credentials.server, 'https://127.0.0.1:6443');
      assert.equal((await credentials.current()).headers.Authorization, 'Bearer first');
      writeFileSync(file, 'second\n');
      now = 10_000;
      assert.equal((await credentials.current()).headers.Authorization, 'Bearer first', 'cached until the refresh interval');
      now = 31_000;
      assert.equal((await credentials.current()).headers.Authorization, 'Bearer second');
    });
  }

  it('sends username and password as basic auth', async () => {
    const credentials = new Credentials({ kubeconfig: kubeconfig('basic', { username: 'alice', password: 's3cret' }) });
    assert.equal((await credentials.current()).headers.Authorization, `Basic ${Buffer.from('alice:s3cret').toString('base64')}`);
  });

  it('prefers an inline token over a token file, as kubectl does', async () => {
    const file = join(dir, 'unused.token');
    writeFileSync(file, 'from-file');
    const credentials = new Credentials({ kubeconfig: kubeconfig('inline', { token: 'inline', tokenFile: file }) });
    assert.equal((await credentials.current()).headers.Authorization, 'Bearer inline');
  });

  it('after a 401 reads everything afresh, but not twice within a few seconds', async () => {
    const file = join(dir, 'rotating.token');
    writeFileSync(file, 'old');
    let now = 0;
    const credentials = new Credentials({ kubeconfig: kubeconfig('rotating', { tokenFile: file }) }, 30_000, clockReading(() => now));
    assert.equal((await credentials.current()).headers.Authorization, 'Bearer old');
    writeFileSync(file, 'new');
    now = 2_000;
    credentials.invalidate();
    assert.equal((await credentials.current()).headers.Authorization, 'Bearer old', 'applied 2 s ago: a 401 now is not for staleness');
    now = 6_000;
    credentials.invalidate();
    assert.equal((await credentials.current()).headers.Authorization, 'Bearer new');
  });

  it('does not keep a refresh that started before a 401', async () => {
    const file = join(dir, 'racing.token');
    writeFileSync(file, 'old');
    let now = 0;
    const credentials = new Credentials({ kubeconfig: kubeconfig('racing', { tokenFile: file }) }, 30_000, clockReading(() => now));
    await credentials.current();
    now = 40_000;
    const inFlight = credentials.current(); // a refresh starts, and reads 'old'
    credentials.invalidate(); // a 401 meanwhile
    assert.equal((await inFlight).headers.Authorization, 'Bearer old');
    writeFileSync(file, 'new');
    assert.equal((await credentials.current()).headers.Authorization, 'Bearer new', 'the next request applies afresh');
  });
});

// A kubeconfig read and applied without client-node's KubeConfig (kubeconfig.ts): what a request
// sends for each way a kubeconfig says who relsync is and whom to trust. Files named relative to
// the kubeconfig resolve against its folder, whatever the working directory; an exec plugin runs
// through client-node's own ExecAuth, cached until its credential expires and run again once the
// kubeconfig is read again. No API server is needed: only what would be sent.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { applyKubeconfig, loadKubeconfig } from '../../../src/kube/kubeconfig.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-kubeconfig-'));

function write(name: string, config: Record<string, unknown>): string {
  const folder = join(dir, name);
  mkdirSync(folder, { recursive: true });
  const path = join(folder, 'kubeconfig');
  writeFileSync(path, JSON.stringify({ apiVersion: 'v1', kind: 'Config', ...config }));
  return path;
}

const cluster = (name: string, fields: Record<string, unknown>) => ({ name, cluster: { server: `https://${name}.example:6443/`, ...fields } });
const context = (name: string, clusterName: string, user?: string) => ({ name, context: { cluster: clusterName, ...(user ? { user } : {}) } });

describe('kubeconfig', () => {
  it('reads files named relative to the kubeconfig from its folder, not the working directory', async () => {
    const path = write('relative', {
      'current-context': 'c',
      clusters: [cluster('one', { 'certificate-authority': 'ca.crt' })],
      users: [{ name: 'u', user: { 'client-certificate': 'certs/client.crt', 'client-key': 'certs/client.key', 'token-file': 'token' } }],
      contexts: [context('c', 'one', 'u')],
    });
    const folder = join(dir, 'relative');
    mkdirSync(join(folder, 'certs'));
    writeFileSync(join(folder, 'ca.crt'), 'the CA');
    writeFileSync(join(folder, 'certs', 'client.crt'), 'the cert');
    writeFileSync(join(folder, 'certs', 'client.key'), 'the key');
    writeFileSync(join(folder, 'token'), 'from-the-file\n');
    const config = loadKubeconfig(path);
    assert.equal(config.cluster.server, 'https://one.example:6443');
    const applied = await applyKubeconfig(config);
    assert.equal(String(applied.tls.ca), 'the CA');
    assert.equal(String(applied.tls.cert), 'the cert');
    assert.equal(String(applied.tls.key), 'the key');
    assert.equal(applied.headers.Authorization, 'Bearer from-the-file');
  });

  it('takes the context it is told, or the current one, and names what is missing', () => {
    const config = {
      'current-context': 'a',
      clusters: [cluster('one', {}), cluster('two', {})],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [context('a', 'one', 'u'), context('b', 'two', 'u'), context('broken', 'three', 'u')],
    };
    const path = write('contexts', config);
    assert.equal(loadKubeconfig(path).cluster.name, 'one');
    assert.equal(loadKubeconfig(path, 'b').cluster.name, 'two');
    assert.throws(() => loadKubeconfig(path, 'c'), /no context named "c"/);
    assert.throws(() => loadKubeconfig(path, 'broken'), /context "broken" names a cluster it does not have \("three"\)/);
    assert.throws(() => loadKubeconfig(write('no-current', { ...config, 'current-context': undefined })), /no current context/);
    const proxied = write('proxied', { ...config, clusters: [cluster('one', { 'proxy-url': 'http://proxy:3128' }), cluster('two', {})] });
    assert.throws(() => loadKubeconfig(proxied), /cluster "one" has a proxy-url, which relsync does not support/);
    assert.equal(loadKubeconfig(proxied, 'b').cluster.name, 'two', "another cluster's proxy is not in the way");
  });

  it('applies TLS server name, skip-verify and impersonation; a context without a user still trusts its CA', async () => {
    const ca = Buffer.from('inline CA').toString('base64');
    const path = write('tls', {
      'current-context': 'c',
      clusters: [cluster('one', { 'certificate-authority-data': ca, 'tls-server-name': 'api.internal', 'insecure-skip-tls-verify': true })],
      users: [{ name: 'u', user: { token: 't', as: 'someone' } }],
      contexts: [context('c', 'one', 'u'), context('anonymous', 'one')],
    });
    const applied = await applyKubeconfig(loadKubeconfig(path));
    assert.equal(applied.tls.servername, 'api.internal');
    assert.equal(applied.tls.rejectUnauthorized, false);
    assert.equal(applied.headers['Impersonate-User'], 'someone');
    assert.equal(applied.headers.Authorization, 'Bearer t');
    const anonymous = await applyKubeconfig(loadKubeconfig(path, 'anonymous'));
    assert.equal(String(anonymous.tls.ca), 'inline CA');
    assert.equal(anonymous.headers.Authorization, undefined);
  });

  it("runs an exec plugin through client-node's ExecAuth: cached until it expires, run again once the kubeconfig is read again", async () => {
    const folder = join(dir, 'exec');
    mkdirSync(folder, { recursive: true });
    const runs = join(folder, 'runs');
    const plugin = join(folder, 'plugin.sh');
    const expires = new Date(Date.now() + 3_600_000).toISOString();
    writeFileSync(plugin, `#!/bin/sh\necho run >> '${runs}'\nn=$(wc -l < '${runs}' | tr -d ' ')\nprintf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"exec-%s","expirationTimestamp":"${expires}"}}' "$n"\n`);
    chmodSync(plugin, 0o755);
    const path = write('exec', {
      'current-context': 'c',
      clusters: [cluster('one', {})],
      users: [{ name: 'u', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: plugin, args: [] } } }],
      contexts: [context('c', 'one', 'u')],
    });
    const config = loadKubeconfig(path);
    assert.equal((await applyKubeconfig(config)).headers.Authorization, 'Bearer exec-1');
    assert.equal((await applyKubeconfig(config)).headers.Authorization, 'Bearer exec-1', 'cached until its expirationTimestamp');
    assert.equal((await applyKubeconfig(loadKubeconfig(path))).headers.Authorization, 'Bearer exec-2', 'a kubeconfig read again runs the plugin again');
    assert.equal(readFileSync(runs, 'utf8').split('\n').filter(Boolean).length, 2);
  });
});

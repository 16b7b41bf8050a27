// A kubeconfig read and applied without client-node's KubeConfig (kubeconfig.ts): what a request
// sends for each way a kubeconfig says who relsync is and whom to trust. Files named relative to
// the kubeconfig resolve against its folder, whatever the working directory; an exec plugin runs
// through client-node's own ExecAuth, cached until its credential expires and run again once the
// kubeconfig is read again. No API server is needed: only what would be sent.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
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
  after(() => rmSync(dir, { recursive: true, force: true }));

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

  it('sends one credential, as kubectl would: a token file over basic auth over an inline token over a plugin', async () => {
    const token = join(dir, 'precedence.token');
    writeFileSync(token, 'from-file\n');
    const plugin = join(dir, 'precedence-plugin.sh');
    writeFileSync(plugin, `#!/bin/sh\nprintf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"from-plugin"}}'\n`);
    chmodSync(plugin, 0o755);
    const exec = { apiVersion: 'client.authentication.k8s.io/v1beta1', command: plugin, args: [] };
    const authorization = async (user: Record<string, unknown>) => {
      const path = write(`precedence-${Object.keys(user).sort().join('-')}`, { 'current-context': 'c', clusters: [cluster('one', {})], users: [{ name: 'u', user }], contexts: [context('c', 'one', 'u')] });
      return (await applyKubeconfig(loadKubeconfig(path))).headers.Authorization;
    };
    const basic = `Basic ${Buffer.from('alice:pw').toString('base64')}`;
    assert.equal(await authorization({ exec }), 'Bearer from-plugin');
    assert.equal(await authorization({ exec, token: 'inline' }), 'Bearer inline');
    assert.equal(await authorization({ exec, token: 'inline', username: 'alice', password: 'pw' }), basic);
    assert.equal(await authorization({ exec, username: 'alice', password: 'pw', tokenFile: token }), 'Bearer from-file');
    assert.equal(await authorization({ token: 'inline', tokenFile: token }), 'Bearer inline', 'an inline token wins over a token file (kubectl)');
  });

  it('sends the client certificate an exec plugin answers with, over the files', async () => {
    const plugin = join(dir, 'cert-plugin.sh');
    writeFileSync(plugin, `#!/bin/sh\nprintf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"clientCertificateData":"plugin cert","clientKeyData":"plugin key"}}'\n`);
    chmodSync(plugin, 0o755);
    const path = write('exec-cert', {
      'current-context': 'c',
      clusters: [cluster('one', {})],
      users: [{ name: 'u', user: { 'client-certificate-data': Buffer.from('file cert').toString('base64'), 'client-key-data': Buffer.from('file key').toString('base64'), exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: plugin, args: [] } } }],
      contexts: [context('c', 'one', 'u')],
    });
    const { tls, headers } = await applyKubeconfig(loadKubeconfig(path));
    assert.equal(String(tls.cert), 'plugin cert');
    assert.equal(String(tls.key), 'plugin key');
    assert.equal(headers.Authorization, undefined);
  });

  it('refuses what would go wrong unsaid: plain http with credentials, a missing user, YAML that quotes a secret in its error', async () => {
    const base = { 'current-context': 'c', users: [{ name: 'u', user: { token: 't' } }], contexts: [context('c', 'one', 'u')] };
    const http = write('http', { ...base, clusters: [{ name: 'one', cluster: { server: 'http://127.0.0.1:8080' } }] });
    assert.throws(() => loadKubeconfig(http), /cluster "one" is served over plain http/);
    const allowed = write('http-allowed', { ...base, clusters: [{ name: 'one', cluster: { server: 'http://127.0.0.1:8080', 'insecure-skip-tls-verify': true } }] });
    assert.equal(loadKubeconfig(allowed).cluster.server, 'http://127.0.0.1:8080', 'unless the cluster says it is not to be verified');
    const noUser = write('no-user', { ...base, clusters: [cluster('one', {})], users: [] });
    assert.throws(() => loadKubeconfig(noUser), /context "c" names a user it does not have \("u"\)/);
    const broken = join(dir, 'broken.kubeconfig');
    writeFileSync(broken, 'users:\n- name: u\n  user:\n    token: s3cret-token: [\n');
    assert.throws(() => loadKubeconfig(broken), (err: Error) => /not valid YAML/.test(err.message) && !err.message.includes('s3cret'));
  });

  it('applies YAML merge keys, as kubectl does', async () => {
    const path = join(dir, 'merge.kubeconfig');
    writeFileSync(path, [
      'current-context: c',
      'clusters:',
      '- name: one',
      '  cluster: &base',
      '    server: https://one.example:6443',
      '    tls-server-name: api.internal',
      'contexts:',
      '- name: c',
      '  context: {cluster: one, user: u}',
      'users:',
      '- name: u',
      '  user:',
      '    <<: {token: merged}',
      '',
    ].join('\n'));
    const applied = await applyKubeconfig(loadKubeconfig(path));
    assert.equal(applied.headers.Authorization, 'Bearer merged');
    assert.equal(applied.tls.servername, 'api.internal');
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

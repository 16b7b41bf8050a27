/**
 * kcp with two shards on loopback, as kcp's own sharded test server runs it
 * (cmd/sharded-test-server): a cache server, the root shard, a second shard
 * `shard-1` registered with the root, and the front-proxy that routes
 * `/clusters/<workspace>` to the shard that holds it. Certificates come from
 * the openssl command (one serving CA for every shard, as the front-proxy's
 * mapping wants; a request-header CA for the proxy's client certificate), and
 * users from one static token file shared by all. Each Shard is labelled
 * `relsync-shard=<name>`, so that a workspace can be placed on one
 * (createWorkspacesOn). Binaries: scripts/build-kcp.sh.
 */
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { freePort, startTracked, stopProcess } from './control-plane.js';
import { kcpPath, raw, writeKcpKubeconfig, type Kcp } from './kcp.js';
import { eventually } from './kube.js';

export interface ShardedKcp extends Kcp {
  /** Each shard's own URL (its virtual workspaces are served there), by shard name. */
  readonly shards: Readonly<Record<'root' | 'shard-1', string>>;
}

function openssl(dir: string, ...args: string[]): void {
  const out = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${out.stderr}`);
}

/** A key and a certificate signed by `ca`, for a server on loopback or (clientAuth) a client. */
function certificate(dir: string, name: string, ca: string, usage: 'serverAuth' | 'clientAuth', cn = name): void {
  openssl(dir, 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
  writeFileSync(join(dir, `${name}.ext`), `${usage === 'serverAuth' ? 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' : ''}extendedKeyUsage=${usage}\n`);
  openssl(dir, 'x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`);
}

export async function startShardedKcp(): Promise<ShardedKcp> {
  const kcp = kcpPath();
  const bin = dirname(kcp);
  for (const b of ['cache-server', 'kcp-front-proxy']) if (!existsSync(join(bin, b))) throw new Error(`no ${b} beside ${kcp}; build it with 'bash scripts/build-kcp.sh'`);
  const dir = mkdtempSync(join(tmpdir(), 'relsync-kcp-sharded-'));
  for (const ca of ['ca', 'rh-ca']) openssl(dir, 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${ca}.key`, '-out', `${ca}.crt`, '-days', '2', '-subj', `/CN=relsync-test-${ca}`);
  for (const s of ['root', 'shard1', 'proxy', 'cache']) certificate(dir, s, 'ca', 'serverAuth');
  certificate(dir, 'fp-client', 'rh-ca', 'clientAuth', 'kcp-front-proxy');
  const t = () => randomBytes(16).toString('hex');
  const [token, agentToken, shardAdmin, lca, elca] = [t(), t(), t(), t(), t()];
  writeFileSync(join(dir, 'tokens.csv'), [
    `${token},relsync-admin,relsync-admin-uid,"system:kcp:admin"`,
    `${agentToken},relsync-agent,relsync-agent-uid,`,
    `${shardAdmin},shard-admin,shard-admin-uid,"system:masters"`,
    `${lca},logical-cluster-admin,lca-uid,"system:kcp:logical-cluster-admin"`,
    `${elca},external-logical-cluster-admin,elca-uid,"system:kcp:external-logical-cluster-admin"`,
    '',
  ].join('\n'));
  const ports: number[] = [];
  while (ports.length < 8) {
    const p = await freePort();
    if (!ports.includes(p)) ports.push(p);
  }
  const [proxyPort, rootPort, shardPort, cachePort, cacheEtcd, cacheEtcdPeer, rootEtcd, rootEtcdPeer] = ports as [number, number, number, number, number, number, number, number];
  const [shardEtcd, shardEtcdPeer] = [await freePort(), await freePort()];
  const ca = join(dir, 'ca.crt');
  const kubeconfig = (file: string, server: string, as: string | undefined, context = 'shard-base') => {
    writeFileSync(join(dir, file), [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: '${server}', certificate-authority: ${ca}}}]`,
      `users: [{name: u, user: {${as ? `token: ${as}` : ''}}}]`,
      `contexts: [{name: ${context}, context: {cluster: c, user: u}}]`,
      `current-context: ${context}`,
      '',
    ].join('\n'));
    return join(dir, file);
  };
  const url = `https://127.0.0.1:${proxyPort}`;
  const rootUrl = `https://127.0.0.1:${rootPort}`;
  const shardUrl = `https://127.0.0.1:${shardPort}`;
  kubeconfig('cache.kubeconfig', `https://127.0.0.1:${cachePort}`, undefined);
  kubeconfig('lca.kubeconfig', rootUrl, lca);
  kubeconfig('elca.kubeconfig', url, elca);
  kubeconfig('root.kubeconfig', rootUrl, shardAdmin);
  kubeconfig('shards.kubeconfig', rootUrl, shardAdmin);
  writeFileSync(join(dir, 'mapping.yaml'), [
    '- path: /clusters/',
    `  backend: ${rootUrl}`,
    `  backend_server_ca: ${ca}`,
    `  proxy_client_cert: ${join(dir, 'fp-client.crt')}`,
    `  proxy_client_key: ${join(dir, 'fp-client.key')}`,
    '',
  ].join('\n'));
  for (const d of ['cache-dir', 'root-dir', 'shard1-dir', 'proxy-dir']) mkdirSync(join(dir, d));
  const children: ReturnType<typeof startTracked>[] = [];
  const stop = async () => {
    for (const c of children.reverse()) await stopProcess(c, 10_000);
    if (!process.env.RELSYNC_KEEP_CONTROL_PLANES) rmSync(dir, { recursive: true, force: true });
  };
  const ready = async (what: string, at: string, log: string) => {
    await eventually(`${what} /readyz (log ${log})`, async () => {
      const dead = children.find((c) => c.exitCode !== null);
      if (dead) throw new Error(`a kcp process exited with ${dead.exitCode}:\n${existsSync(log) ? readFileSync(log, 'utf8').slice(-2000) : ''}`);
      return (await raw('GET', `${at}/readyz`, undefined, undefined, readFileSync(ca))).status === 200 || undefined;
    }, 240_000);
  };
  const common = [
    '--bind-address=127.0.0.1',
    `--token-auth-file=${join(dir, 'tokens.csv')}`,
    `--requestheader-client-ca-file=${join(dir, 'rh-ca.crt')}`,
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    `--cache-kubeconfig=${join(dir, 'cache.kubeconfig')}`,
    `--logical-cluster-admin-kubeconfig=${join(dir, 'lca.kubeconfig')}`,
    `--external-logical-cluster-admin-kubeconfig=${join(dir, 'elca.kubeconfig')}`,
    `--shard-external-url=${url}`,
  ];
  try {
    children.push(startTracked(join(bin, 'cache-server'), [`--root-directory=${join(dir, 'cache-dir')}`, '--bind-address=127.0.0.1', `--secure-port=${cachePort}`, `--embedded-etcd-client-port=${cacheEtcd}`, `--embedded-etcd-peer-port=${cacheEtcdPeer}`, `--tls-cert-file=${join(dir, 'cache.crt')}`, `--tls-private-key-file=${join(dir, 'cache.key')}`], join(dir, 'cache.log'), 'kcp-cache-server'));
    children.push(startTracked(kcp, ['start', `--root-directory=${join(dir, 'root-dir')}`, `--secure-port=${rootPort}`, `--embedded-etcd-client-port=${rootEtcd}`, `--embedded-etcd-peer-port=${rootEtcdPeer}`, `--tls-cert-file=${join(dir, 'root.crt')}`, `--tls-private-key-file=${join(dir, 'root.key')}`, ...common], join(dir, 'root.log'), 'kcp-root'));
    await ready('kcp root shard', rootUrl, join(dir, 'root.log'));
    children.push(startTracked(kcp, ['start', '--shard-name=shard-1', `--root-shard-kubeconfig-file=${join(dir, 'root.kubeconfig')}`, `--root-directory=${join(dir, 'shard1-dir')}`, `--secure-port=${shardPort}`, `--embedded-etcd-client-port=${shardEtcd}`, `--embedded-etcd-peer-port=${shardEtcdPeer}`, `--tls-cert-file=${join(dir, 'shard1.crt')}`, `--tls-private-key-file=${join(dir, 'shard1.key')}`, ...common], join(dir, 'shard1.log'), 'kcp-shard-1'));
    children.push(startTracked(join(bin, 'kcp-front-proxy'), ['--bind-address=127.0.0.1', `--secure-port=${proxyPort}`, `--mapping-file=${join(dir, 'mapping.yaml')}`, `--root-directory=${join(dir, 'proxy-dir')}`, `--root-kubeconfig=${join(dir, 'root.kubeconfig')}`, `--shards-kubeconfig=${join(dir, 'shards.kubeconfig')}`, `--token-auth-file=${join(dir, 'tokens.csv')}`, `--tls-cert-file=${join(dir, 'proxy.crt')}`, `--tls-private-key-file=${join(dir, 'proxy.key')}`], join(dir, 'proxy.log'), 'kcp-front-proxy'));
    await ready('kcp shard-1', shardUrl, join(dir, 'shard1.log'));
    await ready('kcp front-proxy', url, join(dir, 'proxy.log'));
  } catch (err) {
    await stop();
    throw err;
  }
  const caBytes = readFileSync(ca);
  const sharded: ShardedKcp = {
    url,
    token,
    agentToken,
    ca: caBytes,
    dir,
    shards: { root: rootUrl, 'shard-1': shardUrl },
    request: <T>(method: string, path: string, body?: unknown) => raw<T>(method, path.startsWith('https:') ? path : `${url}${path}`, body, token, caBytes),
    kubeconfig: (file: string, server = url, as = token) => writeKcpKubeconfig(file, server, caBytes, as),
    stop,
  };
  // Each Shard labelled by name, so that a workspace's location selector can pick it (shard-1 registers itself with the root).
  for (const shard of ['root', 'shard-1']) {
    await eventually(`Shard ${shard} labelled`, async () => {
      const res = await raw('PATCH', `${url}/clusters/root/apis/core.kcp.io/v1alpha1/shards/${shard}`, { metadata: { labels: { 'relsync-shard': shard } } }, token, caBytes, 'application/merge-patch+json');
      return res.status === 200 || undefined;
    }, 60_000);
  }
  return sharded;
}

/** Workspaces under root on one shard (a location selector on the shard's label), Ready; returns each one's logical cluster name. */
export async function createWorkspacesOn(kcp: ShardedKcp, shard: 'root' | 'shard-1', ...names: string[]): Promise<Record<string, string>> {
  for (const name of names) {
    await eventually(`workspace root:${name} created on ${shard}`, async () => {
      const res = await kcp.request('POST', '/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces', { apiVersion: 'tenancy.kcp.io/v1alpha1', kind: 'Workspace', metadata: { name }, spec: { location: { selector: { matchLabels: { 'relsync-shard': shard } } } } });
      if (res.status === 201 || res.status === 409) return true;
      if (res.status === 403 && /parent type cannot be resolved/.test(JSON.stringify(res.body))) return undefined;
      throw new Error(`POST workspace ${name}: ${res.status} ${JSON.stringify(res.body)}`);
    }, 60_000);
  }
  const clusters: Record<string, string> = {};
  for (const name of names) {
    clusters[name] = await eventually(`workspace root:${name} Ready`, async () => {
      const ws = await kcp.request<{ status?: { phase?: string }; spec?: { cluster?: string } }>('GET', `/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/${name}`);
      return ws.body.status?.phase === 'Ready' ? ws.body.spec?.cluster : undefined;
    }, 180_000);
  }
  return clusters;
}

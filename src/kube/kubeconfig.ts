/**
 * A kubeconfig read into what one connection needs, the current context's cluster and user, and
 * applied to a request as client-node's KubeConfig applies it: client-node's own parsers
 * (config_types.js) and its authenticators (exec plugins, token files, OIDC, the Azure and GCP
 * auth providers), each loaded from its own module. Not through KubeConfig: importing it (the
 * package's index, or dist/config.js) loads client-node's generated API clients, which relsync
 * never uses (it talks REST itself, connection.ts) and which cost 27 MB of heap and 65 MB of
 * resident memory in every process (issue #38: `node --expose-gc`, process.memoryUsage() after
 * the import: the modules below take 0.6 MB of heap, and connection.ts with all it imports 2.1 MB).
 * client-node 1.4 has no `exports` map, so these paths are its files; package.json pins its minor
 * version, and lint allows only these (eslint.config.js).
 *
 * Where this differs from KubeConfig: the cluster's TLS options are applied also when the
 * context names no user (KubeConfig then applies none, and the CA is not trusted), a user's
 * `tokenFile` (kubectl's spelling; client-node reads only `token-file`, and only once, from the
 * working directory) is read at every apply from the kubeconfig's folder, trimmed, basic auth
 * (`username`/`password`) is a header, and a context that names a missing user, or a cluster with
 * a `proxy-url`, is refused. As in KubeConfig, impersonation is `as` only (not `as-groups`).
 */
import { readFileSync } from 'node:fs';
import type https from 'node:https';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
import { parse, YAMLError } from 'yaml';
import type { Authenticator } from '@kubernetes/client-node/dist/auth.js';
import { AzureAuth } from '@kubernetes/client-node/dist/azure_auth.js';
import { newClusters, newContexts, newUsers, type Cluster, type Context, type User } from '@kubernetes/client-node/dist/config_types.js';
import { ExecAuth } from '@kubernetes/client-node/dist/exec_auth.js';
import { FileAuth } from '@kubernetes/client-node/dist/file_auth.js';
import { GoogleCloudPlatformAuth } from '@kubernetes/client-node/dist/gcp_auth.js';
import { OpenIDConnectAuth } from '@kubernetes/client-node/dist/oidc_auth.js';

/** Where a pod's service account is mounted (loadInCluster). */
const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

/** What a request needs: authentication headers and TLS options. */
export interface AppliedCredentials {
  readonly headers: Readonly<Record<string, string>>;
  readonly tls: Pick<https.RequestOptions, 'ca' | 'cert' | 'key' | 'rejectUnauthorized' | 'servername'>;
}

/** One context of a kubeconfig, read. */
export interface Kubeconfig {
  readonly cluster: Cluster;
  readonly user: User | undefined;
  /** The user's token file (either spelling), absolute; read at every apply. Absent when a token is given inline. */
  readonly tokenFile: string | undefined;
  /**
   * client-node's authenticators, this read's own: an exec plugin's credential is cached in its
   * instance until it expires, so a kubeconfig read again (after a 401) runs the plugin again.
   */
  readonly authenticators: readonly Authenticator[];
}

interface RawUser {
  readonly name?: unknown;
  readonly user?: Record<string, unknown>;
}

interface RawKubeconfig {
  readonly clusters?: unknown;
  readonly users?: unknown;
  readonly contexts?: unknown;
  readonly 'current-context'?: unknown;
}

/** `context` of the kubeconfig at `path` (default: its current context). Throws what is missing or wrong. */
export function loadKubeconfig(path: string, context?: string): Kubeconfig {
  const raw = readYaml(path);
  const root = dirname(path);
  const name = context ?? (typeof raw['current-context'] === 'string' ? raw['current-context'] : undefined);
  if (!name) throw new Error('the kubeconfig has no current context');
  const chosen = byName(newContexts(raw.contexts), name);
  if (!chosen) throw new Error(`the kubeconfig has no context named ${JSON.stringify(name)}`);
  const cluster = byName(newClusters(raw.clusters), chosen.cluster);
  if (!cluster) throw new Error(`the kubeconfig's context ${JSON.stringify(name)} names a cluster it does not have (${JSON.stringify(chosen.cluster)})`);
  // relsync's agent connects directly: a proxy the kubeconfig asks for would be bypassed unsaid.
  if (cluster.proxyUrl) throw new Error(`the kubeconfig's cluster ${JSON.stringify(cluster.name)} has a proxy-url, which relsync does not support (it connects to the API server directly)`);
  // Only the context's user is parsed, without `token-file`: client-node reads that file as it
  // parses, once, relative to the working directory; tokenFileOf reads it at every apply instead.
  const users = chosen.user ? rawUsers(raw).filter((u): u is RawUser => u?.name === chosen.user) : [];
  const user = newUsers(users.map((u) => ({ ...u, user: u.user && { ...u.user, 'token-file': undefined } })))[0];
  // As kubectl: a user named and not there is a kubeconfig to fix (or one caught while it is rewritten), not anonymous access.
  if (chosen.user && !user) throw new Error(`the kubeconfig's context ${JSON.stringify(name)} names a user it does not have (${JSON.stringify(chosen.user)})`);
  refusePlainHttp(cluster);
  return {
    cluster: { ...cluster, caFile: absolute(root, cluster.caFile) },
    user: user && { ...user, certFile: absolute(root, user.certFile), keyFile: absolute(root, user.keyFile) },
    tokenFile: tokenFileOf(root, raw, chosen),
    authenticators: authenticators(),
  };
}

/** The pod's service account, as client-node's loadFromCluster reads it: its token file read again as the kubelet rotates it. */
export function loadInCluster(): Kubeconfig {
  const host = process.env.KUBERNETES_SERVICE_HOST;
  const port = process.env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error('no kubeconfig given, and not in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set)');
  const scheme = ['80', '8080', '8001'].includes(port) ? 'http' : 'https';
  const cluster = { name: 'inCluster', server: `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`, caFile: `${SERVICE_ACCOUNT}/ca.crt`, skipTLSVerify: false };
  refusePlainHttp(cluster);
  return {
    cluster,
    user: { name: 'inClusterUser' },
    tokenFile: `${SERVICE_ACCOUNT}/token`,
    authenticators: [],
  };
}

/** The headers and TLS options a request sends now: an exec plugin runs (or its cached credential is used), files are read. */
export async function applyKubeconfig(config: Kubeconfig): Promise<AppliedCredentials> {
  const { cluster, user } = config;
  const options: https.RequestOptions & { headers: Record<string, string> } = { headers: {} };
  const ca = fileOrData(cluster.caFile, cluster.caData);
  let cert: https.RequestOptions['cert'] = user && fileOrData(user.certFile, user.certData);
  let key: https.RequestOptions['key'] = user && fileOrData(user.keyFile, user.keyData);
  if (user) {
    if (user.impersonateUser) options.headers['Impersonate-User'] = user.impersonateUser;
    // As KubeConfig: the first authenticator that takes the user, then an inline token over it.
    await config.authenticators.find((a) => a.isAuthProvider(user))?.applyAuthentication(user, options);
    // An exec plugin may answer with a client certificate (Teleport, Pinniped): it wins over the files, as in KubeConfig.
    cert = options.cert ?? cert;
    key = options.key ?? key;
    if (user.token) options.headers.Authorization = `Bearer ${user.token}`;
    if (user.username) options.headers.Authorization = `Basic ${Buffer.from(`${user.username}:${user.password ?? ''}`).toString('base64')}`;
  }
  if (config.tokenFile) options.headers.Authorization = `Bearer ${readFileSync(config.tokenFile, 'utf8').trim()}`;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(options.headers)) if (typeof v === 'string') headers[k] = v.trim();
  return {
    headers,
    tls: {
      ...(ca ? { ca } : {}),
      ...(cert ? { cert } : {}),
      ...(key ? { key } : {}),
      ...(cluster.skipTLSVerify ? { rejectUnauthorized: false } : {}),
      ...(cluster.tlsServerName ? { servername: cluster.tlsServerName } : {}),
    },
  };
}

/**
 * The kubeconfig's YAML (merge keys applied, as js-yaml and kubectl do). A syntax error is said by
 * its first line only: the YAML library's message goes on to quote the lines around it, which may
 * hold a token or a key.
 */
function readYaml(path: string): RawKubeconfig {
  let raw: unknown;
  try {
    raw = parse(readFileSync(path, 'utf8'), { merge: true, logLevel: 'error' });
  } catch (err) {
    if (!(err instanceof YAMLError)) throw err;
    // eslint-disable-next-line preserve-caught-error -- the cause quotes the kubeconfig's lines, which may hold a token or a key
    throw new Error(`the kubeconfig is not valid YAML: ${err.message.split('\n')[0]}`);
  }
  return (raw ?? {}) as RawKubeconfig;
}

/** As client-node does: credentials are not sent over plain http unless the cluster says its server is not to be verified. */
function refusePlainHttp(cluster: Pick<Cluster, 'name' | 'server' | 'skipTLSVerify'>): void {
  if (cluster.server.startsWith('http:') && !cluster.skipTLSVerify) {
    throw new Error(`the kubeconfig's cluster ${JSON.stringify(cluster.name)} is served over plain http (${cluster.server}), where credentials would travel unencrypted; relsync refuses it unless the cluster says insecure-skip-tls-verify: true`);
  }
}

function authenticators(): Authenticator[] {
  return [new AzureAuth(), new GoogleCloudPlatformAuth(), new ExecAuth(), new FileAuth(), new OpenIDConnectAuth()];
}

function rawUsers(raw: RawKubeconfig): ReadonlyArray<RawUser | null | undefined> {
  return Array.isArray(raw.users) ? (raw.users as Array<RawUser | null | undefined>) : [];
}

function byName<T extends { readonly name: string }>(list: readonly T[], name: string): T | undefined {
  return list.find((item) => item.name === name);
}

function absolute(root: string, file: string | undefined): string | undefined {
  return file && !isAbsolute(file) ? join(root, file) : file;
}

function fileOrData(file: string | undefined, data: string | undefined): Buffer | undefined {
  if (file) return readFileSync(file);
  return data ? Buffer.from(data, 'base64') : undefined;
}

/**
 * The token file of the context's user, under either spelling (`tokenFile` as kubectl writes it,
 * `token-file` as client-node reads it), relative to the kubeconfig's folder as kubectl resolves
 * it; none when a token is given inline (it wins, as in kubectl).
 */
function tokenFileOf(root: string, raw: RawKubeconfig, context: Context): string | undefined {
  const user = context.user ? rawUsers(raw).find((u) => u?.name === context.user)?.user : undefined;
  if (typeof user?.token === 'string' && user.token !== '') return undefined;
  const file = user?.tokenFile ?? user?.['token-file'];
  return typeof file === 'string' && file !== '' ? absolute(root, file) : undefined;
}

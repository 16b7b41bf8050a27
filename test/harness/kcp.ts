/**
 * A real kcp for tests: `kcp start` (etcd embedded) with its own root
 * folder, loopback ports and a static token, built by scripts/build-kcp.sh.
 * Helpers set up what a service provider has: a provider workspace with an
 * APIExport (and permission claims for ConfigMaps and Secrets), consumer
 * workspaces that bind it, and the APIExport's virtual workspace URL.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { freePort, retryOnPortClash, startTracked, stopProcess } from './control-plane.js';
import { eventually } from './kube.js';
import { ClusterClient } from './tenant.js';

export const KCP_VERSION = 'v0.28.1';

/** The kcp binary: RELSYNC_KCP_ASSETS (set by run-tests.mjs) or the build cache. */
export function kcpPath(): string {
  const candidates = [process.env.RELSYNC_KCP_ASSETS, join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'relsync', 'kcp', KCP_VERSION)];
  for (const dir of candidates) if (dir && existsSync(join(dir, 'kcp'))) return join(dir, 'kcp');
  throw new Error(`no kcp binary found (RELSYNC_KCP_ASSETS=${process.env.RELSYNC_KCP_ASSETS ?? '<unset>'}, cache for ${KCP_VERSION}); build it with 'bash scripts/build-kcp.sh'`);
}

export interface Kcp {
  readonly url: string;
  /** Admin token (group system:kcp:admin), from the static token file. */
  readonly token: string;
  /** A token of user `relsync-agent`, in no group: it may do only what RBAC grants it (see grantAgentAccess). */
  readonly agentToken: string;
  readonly ca: Buffer;
  readonly dir: string;
  /** A JSON request against kcp; `path` starts with /clusters/… or is a full URL. */
  request<T = unknown>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** Writes a kubeconfig for `server` (default: kcp's base URL) with the admin token (or `token`). */
  kubeconfig(file: string, server?: string, token?: string): string;
  stop(): Promise<void>;
}

export function startKcp(): Promise<Kcp> {
  return retryOnPortClash('kcp', startKcpOnce);
}

async function startKcpOnce(): Promise<Kcp> {
  const binary = kcpPath();
  const dir = mkdtempSync(join(tmpdir(), 'relsync-kcp-'));
  const token = randomBytes(16).toString('hex');
  const agentToken = randomBytes(16).toString('hex');
  writeFileSync(join(dir, 'tokens.csv'), `${token},relsync-admin,relsync-admin-uid,"system:kcp:admin"\n${agentToken},relsync-agent,relsync-agent-uid,\n`);
  const ports = new Set<number>();
  while (ports.size < 3) ports.add(await freePort()); // three different ones
  const [port, etcdClient, etcdPeer] = [...ports] as [number, number, number];
  const log = join(dir, 'kcp.log');
  const child = startTracked(
    binary,
    [
      'start',
      `--root-directory=${join(dir, 'root')}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${port}`,
      `--embedded-etcd-client-port=${etcdClient}`,
      `--embedded-etcd-peer-port=${etcdPeer}`,
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
    ],
    log,
    'kcp',
  );
  const url = `https://127.0.0.1:${port}`;
  const tail = () => (existsSync(log) ? readFileSync(log, 'utf8').slice(-2000) : '');
  // /readyz answers without credentials; about 30 s on a fresh root folder.
  await eventually(
    `kcp /readyz (log ${log})`,
    async () => {
      if (child.exitCode !== null) throw new Error(`kcp exited with ${child.exitCode}:\n${tail()}`);
      return (await raw('GET', `${url}/readyz`, undefined, undefined, undefined)).status === 200;
    },
    180_000,
  );
  const admin = parse(readFileSync(join(dir, 'root', 'admin.kubeconfig'), 'utf8')) as { clusters: Array<{ cluster: { 'certificate-authority-data'?: string } }> };
  const caData = admin.clusters[0]?.cluster['certificate-authority-data'];
  const ca = caData ? Buffer.from(caData, 'base64') : readFileSync(join(dir, 'root', 'apiserver.crt'));
  return {
    url,
    token,
    agentToken,
    ca,
    dir,
    request: <T>(method: string, path: string, body?: unknown) => raw<T>(method, path.startsWith('https:') ? path : `${url}${path}`, body, token, ca),
    kubeconfig: (file: string, server = url, as = token) => writeKcpKubeconfig(file, server, ca, as),
    async stop() {
      await stopProcess(child, 10_000);
      if (!process.env.RELSYNC_KEEP_CONTROL_PLANES) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A kubeconfig for `server` with a bearer token and kcp's CA (single-shard or sharded). */
export function writeKcpKubeconfig(file: string, server: string, ca: Buffer, token: string): string {
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: kcp, cluster: {server: '${server}', certificate-authority-data: ${ca.toString('base64')}}}]`,
      `users: [{name: admin, user: {token: ${token}}}]`,
      'contexts: [{name: kcp, context: {cluster: kcp, user: admin}}]',
      'current-context: kcp',
      '',
    ].join('\n'),
  );
  return file;
}

/** One JSON request; without a token, a failure to connect answers status 0 (a probe) instead of rejecting. */
export function raw<T>(method: string, url: string, body: unknown, token: string | undefined, ca: Buffer | undefined, contentType = 'application/json'): Promise<{ status: number; body: T }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request(
      url,
      {
        method,
        headers: { Accept: 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(data ? { 'Content-Type': contentType } : {}) },
        ca,
        rejectUnauthorized: ca !== undefined,
        timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = text ? JSON.parse(text) : undefined;
          } catch {
            // not JSON (e.g. "ok" from /readyz)
          }
          resolve({ status: res.statusCode ?? 0, body: parsed as T });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: no answer`)));
    req.on('error', (err) => (token ? reject(err) : resolve({ status: 0, body: undefined as T })));
    req.end(data);
  });
}

/** Creates `body` in a workspace (`/clusters/<path>`) and fails on anything but 201/409. */
async function create(kcp: Kcp, workspace: string, apiPath: string, body: unknown): Promise<void> {
  const res = await kcp.request('POST', `/clusters/${workspace}${apiPath}`, body);
  if (res.status !== 201 && res.status !== 409) throw new Error(`POST /clusters/${workspace}${apiPath}: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Workspaces under root, Ready; returns each one's logical cluster name. */
export async function createWorkspaces(kcp: Kcp, ...names: string[]): Promise<Record<string, string>> {
  return createWorkspacesIn(kcp, 'root', ...names);
}

/** Workspaces under the workspace `parent` (a path, `root:org`), Ready; returns each one's logical cluster name. */
export async function createWorkspacesIn(kcp: Kcp, parent: string, ...names: string[]): Promise<Record<string, string>> {
  for (const name of names) {
    // Right after /readyz, kcp may not yet resolve the parent's workspace type ("parent type cannot be resolved"): asked again.
    await eventually(`workspace ${parent}:${name} created`, async () => {
      const res = await kcp.request('POST', `/clusters/${parent}/apis/tenancy.kcp.io/v1alpha1/workspaces`, { apiVersion: 'tenancy.kcp.io/v1alpha1', kind: 'Workspace', metadata: { name } });
      if (res.status === 201 || res.status === 409) return true;
      if (res.status === 403 && /parent type cannot be resolved/.test(JSON.stringify(res.body))) return undefined;
      throw new Error(`POST /clusters/${parent}/apis/tenancy.kcp.io/v1alpha1/workspaces: ${res.status} ${JSON.stringify(res.body)}`);
    }, 60_000);
  }
  const clusters: Record<string, string> = {};
  for (const name of names) {
    clusters[name] = await eventually(`workspace ${parent}:${name} Ready`, async () => {
      const ws = await kcp.request<{ status?: { phase?: string }; spec?: { cluster?: string } }>('GET', `/clusters/${parent}/apis/tenancy.kcp.io/v1alpha1/workspaces/${name}`);
      return ws.body.status?.phase === 'Ready' ? ws.body.spec?.cluster : undefined;
    }, 120_000);
  }
  return clusters;
}

/** A permission claim beyond the example export's (ConfigMaps, Secrets, Events): a LogicalCluster's, another export's type (by its identity). */
export interface Claim {
  readonly group: string;
  readonly resource: string;
  readonly identityHash?: string;
}

export const DATABASE_EXPORT = 'demo.relsync.dev';

const examples = fileURLToPath(new URL('../../../examples/kcp/', import.meta.url));
interface Manifest {
  metadata: { name: string };
  spec: { resources?: Array<{ schema: string }>; reference?: unknown; permissionClaims?: Array<{ resource: string } & Record<string, unknown>> };
}
const manifests = (file: string): Manifest[] => parseAllDocuments(readFileSync(join(examples, file), 'utf8')).map((d) => d.toJS() as Manifest);

/**
 * The example Database type as an APIResourceSchema and an APIExport claiming
 * ConfigMaps, Secrets and Events: examples/kcp/database-export.yaml, renamed
 * for another export. One schema per export unless `shareSchema`: kcp v0.28
 * shows the objects of every export that shares a schema in each one's
 * wildcard list (and forbids reading them).
 */
export async function createDatabaseExport(kcp: Kcp, provider: string, exportName = DATABASE_EXPORT, options: { shareSchema?: boolean; claims?: readonly Claim[] } = {}): Promise<void> {
  const [schema, apiExport] = manifests('database-export.yaml') as [Manifest, Manifest];
  if (exportName !== DATABASE_EXPORT) {
    if (!options.shareSchema) schema.metadata.name = `${exportName}.databases.demo.relsync.dev`;
    apiExport.metadata.name = exportName;
    apiExport.spec.resources![0]!.schema = schema.metadata.name;
  }
  for (const claim of options.claims ?? []) apiExport.spec.permissionClaims!.push({ ...claim, verbs: ['*'] });
  await create(kcp, provider, '/apis/apis.kcp.io/v1alpha1/apiresourceschemas', schema);
  await create(kcp, provider, '/apis/apis.kcp.io/v1alpha2/apiexports', apiExport);
}

/**
 * Binds the export in a consumer workspace, accepting its claims (`acceptOnly`: only those of these
 * resources; `claims`: the export's claims beyond the example's, accepted too); waits until Ready.
 */
export async function bindDatabaseExport(kcp: Kcp, consumer: string, providerPath: string, exportName = DATABASE_EXPORT, acceptOnly?: readonly string[], claims: readonly Claim[] = []): Promise<void> {
  const [binding] = manifests('database-binding.yaml') as [Manifest];
  binding.metadata.name = exportName;
  binding.spec.reference = { export: { path: providerPath, name: exportName } };
  binding.spec.permissionClaims!.push(...claims.map((c) => ({ ...c, verbs: ['*'], selector: { matchAll: true }, state: 'Accepted' })));
  // a consumer that accepts only some of the claims
  if (acceptOnly) binding.spec.permissionClaims = binding.spec.permissionClaims!.filter((c) => acceptOnly.includes(c.resource));
  await bind(kcp, consumer, binding);
}

/** Binds an export that claims nothing (a type the consumer uses besides the Databases). */
export async function bindExport(kcp: Kcp, consumer: string, providerPath: string, exportName: string): Promise<void> {
  const binding = { apiVersion: 'apis.kcp.io/v1alpha2', kind: 'APIBinding', metadata: { name: exportName }, spec: { reference: { export: { path: providerPath, name: exportName } } } };
  await bind(kcp, consumer, binding);
}

async function bind(kcp: Kcp, consumer: string, binding: { readonly metadata: { readonly name: string } }): Promise<void> {
  // Right after the export is made, kcp may not yet know it may be bound ("no permission to bind"): asked again.
  await eventually(`APIBinding in ${consumer} created`, async () => {
    const res = await kcp.request('POST', `/clusters/${consumer}/apis/apis.kcp.io/v1alpha2/apibindings`, binding);
    if (res.status === 201) return true;
    if (res.status === 403 && /no permission to bind/.test(JSON.stringify(res.body))) return undefined;
    throw new Error(`POST /clusters/${consumer}/apis/apis.kcp.io/v1alpha2/apibindings: ${res.status} ${JSON.stringify(res.body)}`);
  }, 30_000);
  await eventually(`APIBinding in ${consumer} Ready`, async () => {
    const b = await kcp.request<{ status?: { conditions?: Array<{ type: string; status: string }> } }>('GET', `/clusters/${consumer}/apis/apis.kcp.io/v1alpha2/apibindings/${binding.metadata.name}`);
    return b.body.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
  }, 120_000);
}

export const BACKUPS = { group: 'backup.relsync.dev', version: 'v1', plural: 'backups' } as const;

/**
 * An export of a Backup type (BACKUPS) in the workspace `provider`, as another provider makes one;
 * returns its identity hash, which an export that claims its Backups names.
 */
export async function createBackupExport(kcp: Kcp, provider: string, exportName: string = BACKUPS.group): Promise<string> {
  const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  const schema = `v1.${BACKUPS.plural}.${BACKUPS.group}`;
  await create(kcp, provider, '/apis/apis.kcp.io/v1alpha1/apiresourceschemas', {
    apiVersion: 'apis.kcp.io/v1alpha1',
    kind: 'APIResourceSchema',
    metadata: { name: schema },
    spec: { group: BACKUPS.group, names: { kind: 'Backup', listKind: 'BackupList', plural: BACKUPS.plural, singular: 'backup' }, scope: 'Namespaced', versions: [{ name: BACKUPS.version, served: true, storage: true, schema: { type: 'object', properties: { spec: open } } }] },
  });
  await create(kcp, provider, '/apis/apis.kcp.io/v1alpha2/apiexports', { apiVersion: 'apis.kcp.io/v1alpha2', kind: 'APIExport', metadata: { name: exportName }, spec: { resources: [{ name: BACKUPS.plural, group: BACKUPS.group, schema, storage: { crd: {} } }] } });
  return eventually(`APIExport ${exportName} has its identity`, async () => (await kcp.request<{ status?: { identityHash?: string } }>('GET', `/clusters/${provider}/apis/apis.kcp.io/v1alpha2/apiexports/${exportName}`)).body.status?.identityHash, 60_000);
}

/**
 * Grants user `relsync-agent` (kcp.agentToken) what examples/kcp/agent-rbac.yaml
 * grants, for these exports, in the provider's workspace.
 */
export async function grantAgentAccess(kcp: Kcp, provider: string, exportNames: readonly string[] = [DATABASE_EXPORT]): Promise<void> {
  const [role, binding] = parseAllDocuments(readFileSync(join(examples, 'agent-rbac.yaml'), 'utf8')).map((d) => d.toJS() as { rules?: Array<{ resourceNames?: string[] }> }) as [
    { rules: Array<{ resourceNames?: string[] }> },
    unknown,
  ];
  for (const rule of role.rules) if (rule.resourceNames) rule.resourceNames = [...exportNames];
  await create(kcp, provider, '/apis/rbac.authorization.k8s.io/v1/clusterroles', role);
  await create(kcp, provider, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', binding);
  // RBAC in kcp takes effect within moments, not at once
  await eventually('relsync-agent may read the endpoint slice', async () => {
    const res = await raw('GET', `${kcp.url}/clusters/${provider}/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/${exportNames[0]}`, undefined, kcp.agentToken, kcp.ca);
    return res.status === 200;
  }, 30_000);
}

/** The APIExport's virtual workspace URL, from its APIExportEndpointSlice (there once a binding exists). */
export async function virtualWorkspaceUrl(kcp: Kcp, provider: string, exportName = DATABASE_EXPORT): Promise<string> {
  return eventually('APIExportEndpointSlice has an endpoint', async () => {
    const slice = await kcp.request<{ status?: { endpoints?: Array<{ url: string }> } }>('GET', `/clusters/${provider}/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/${exportName}`);
    return slice.body.status?.endpoints?.[0]?.url;
  }, 60_000);
}

/** A ClusterClient on one workspace (`/clusters/<path>`), as its user sees it (not through the virtual workspace). */
export function workspaceClient(kcp: Kcp, path: string, dir: string): ClusterClient {
  const kc = new KubeConfig();
  kc.loadFromFile(kcp.kubeconfig(join(dir, `${path.replace(/:/g, '_')}.kubeconfig`), `${kcp.url}/clusters/${path}`));
  return new ClusterClient(path, kc);
}

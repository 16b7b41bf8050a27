// What only kcp can show of an api-syncagent PublishedResource, end to end on
// a real kcp: `enableWorkspacePaths` (a primary's workspace path, read off its
// LogicalCluster through the APIExport) and a related type of another
// APIExport (`identityHash`), as api-syncagent's TestSyncWithWorkspacePath and
// TestSyncNonStandardRelatedResourcesMultipleAPIExports do, and what a tenant
// could try against them: a workspace path written on its own primary, a claim
// not accepted, and a look-alike Backup type of its own export.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { CustomObjectsApi } from '@kubernetes/client-node';
import Database from 'better-sqlite3';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { BACKUPS, bindDatabaseExport, bindExport, createBackupExport, createDatabaseExport, createWorkspaces, createWorkspacesIn, grantAgentAccess, startKcp, workspaceClient, type Claim, type Kcp } from '../harness/kcp.js';
import { eventually, installCrd } from '../harness/kube.js';
import { runCli, startRelsync, writePublishedConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const EXPORT = 'databases-paths';

const manifest = (identityHash: string) => `
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: databases-with-paths
spec:
  resource: { apiGroup: demo.relsync.dev, versions: [v1alpha1], kind: Database }
  enableWorkspacePaths: true
  naming:
    name: '{{ .Object.metadata.name }}-{{ .ClusterPath | replace ":" "-" }}'
  related:
    - identifier: backup
      origin: service
      group: ${BACKUPS.group}
      version: ${BACKUPS.version}
      resource: ${BACKUPS.plural}
      identityHash: "${identityHash}"
      cleanupPolicy: MatchOrigin
      object:
        template:
          template: "{{ .Object.metadata.name }}-backup"
`;

/** The Backup type in the service cluster, where the operator makes them. */
function backupCrd(dir: string): URL {
  const path = join(dir, 'backups-crd.json');
  const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  writeFileSync(path, JSON.stringify({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${BACKUPS.plural}.${BACKUPS.group}` },
    spec: {
      group: BACKUPS.group,
      scope: 'Namespaced',
      names: { plural: BACKUPS.plural, singular: 'backup', kind: 'Backup', listKind: 'BackupList' },
      versions: [{ name: BACKUPS.version, served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: open } } } }],
    },
  }));
  return pathToFileURL(path);
}

interface Backup {
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
}

let kcp: Kcp;
let service: Clusters<'service'>;

before(async () => {
  const [started, plane] = await Promise.allSettled([startKcp(), startClusters('service')]);
  if (started.status === 'fulfilled') kcp = started.value;
  if (plane.status === 'fulfilled') service = plane.value;
  for (const s of [started, plane]) if (s.status === 'rejected') throw s.reason;
});

after(async () => {
  await service?.stop();
  await kcp?.stop();
});

describe('a PublishedResource on kcp: workspace paths and a related type of another APIExport', () => {
  let dir: string;
  let svc: ClusterClient;
  let backupsSvc: CustomObjectsApi;
  let relsync: RelsyncProcess;
  let dbPath: string;
  let identity: string;
  let lookAlikeIdentity: string;
  /** Logical cluster names of root:org:team-1 … team-3. */
  let lc: Record<'team-1' | 'team-2' | 'team-3', string>;
  const team = (name: keyof typeof lc) => workspaceClient(kcp, `root:org:${name}`, dir);
  const copyNs = (name: keyof typeof lc) => defaultCopyNamespace(lc[name], 'default');
  const backupIn = async (workspace: string, name: string) => {
    const res = await kcp.request<Backup>('GET', `/clusters/${workspace}/apis/${BACKUPS.group}/${BACKUPS.version}/namespaces/default/${BACKUPS.plural}/${name}`);
    return res.status === 200 ? res.body : undefined;
  };
  const putBackup = async (namespace: string, name: string, spec: Record<string, unknown>, owner: { metadata: { name: string; uid?: string } }) => {
    const ownerReferences = [{ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', name: owner.metadata.name, uid: owner.metadata.uid! }];
    await backupsSvc.createNamespacedCustomObject({ ...BACKUPS, namespace, body: { apiVersion: `${BACKUPS.group}/${BACKUPS.version}`, kind: 'Backup', metadata: { name, ownerReferences }, spec } });
  };
  const relation = (cluster: string, ruleId: string) => {
    const db = new Database(dbPath, { readonly: true });
    try {
      return db.prepare('SELECT state, message FROM relations WHERE primary_cluster = ? AND rule_id = ?').get(cluster, ruleId) as { state: string; message: string | null } | undefined;
    } finally {
      db.close();
    }
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-kcp-published-'));
    svc = service.client.service;
    await installCrd(service.plane.service.kubeConfig, backupCrd(dir));
    backupsSvc = service.plane.service.kubeConfig.makeApiClient(CustomObjectsApi);
    await createWorkspaces(kcp, 'provider', 'backup-provider', 'org');
    lc = (await createWorkspacesIn(kcp, 'root:org', 'team-1', 'team-2', 'team-3')) as typeof lc;
    // Another provider's Backup export; the Database export claims its Backups by identity, and each workspace's LogicalCluster.
    identity = await createBackupExport(kcp, 'root:backup-provider');
    const claims: Claim[] = [{ group: 'core.kcp.io', resource: 'logicalclusters' }, { group: BACKUPS.group, resource: BACKUPS.plural, identityHash: identity }];
    await createDatabaseExport(kcp, 'root:provider', EXPORT, { claims });
    for (const t of ['team-1', 'team-2']) await bindExport(kcp, `root:org:${t}`, 'root:backup-provider', BACKUPS.group);
    await bindDatabaseExport(kcp, 'root:org:team-1', 'root:provider', EXPORT, undefined, claims);
    // team-2 accepts every claim but the LogicalClusters'
    await bindDatabaseExport(kcp, 'root:org:team-2', 'root:provider', EXPORT, ['configmaps', 'secrets', 'events', BACKUPS.plural], claims);
    // team-3 has a Backup type of its own export, the same group and resource under another identity
    lookAlikeIdentity = await createBackupExport(kcp, 'root:org:team-3', 'look-alike');
    await bindExport(kcp, 'root:org:team-3', 'root:org:team-3', 'look-alike');
    await bindDatabaseExport(kcp, 'root:org:team-3', 'root:provider', EXPORT, undefined, claims);
    await grantAgentAccess(kcp, 'root:provider', [EXPORT]);
    const written = writePublishedConfig(dir, { platform: '', service: service.plane.service.kubeconfigPath }, manifest(identity), {
      platformClusters: [{ name: 'kcp', kubeconfig: kcp.kubeconfig(join(dir, 'provider.kubeconfig'), `${kcp.url}/clusters/root:provider`, kcp.agentToken), kcp: { apiExportEndpointSlice: EXPORT } }],
    });
    dbPath = written.dbPath;
    relsync = await startRelsync(written.configPath, join(dir, 'relsync.log'));
  });

  after(async () => {
    await relsync?.stop();
  });

  it('names each copy by its workspace path and marks it with the path, whatever the tenant writes on its primary', async () => {
    const t1 = team('team-1');
    await t1.createDatabase('default', 'orders', {});
    // The tenant claims another workspace's path on its own object: relsync's marks are relsync's (never copied).
    await t1.updateDatabase('default', 'orders', (db) => void (db.metadata.annotations = { ...db.metadata.annotations, 'relsync.dev/workspace-path': 'root:org:team-2' }));
    const copy = await eventually('the copy, named by the path', () => svc.database(copyNs('team-1'), 'orders-root-org-team-1'), 60_000);
    assert.equal(copy.metadata?.annotations?.['relsync.dev/workspace-path'], 'root:org:team-1');
    assert.equal(copy.metadata?.annotations?.['relsync.dev/source-cluster'], lc['team-1'], 'the marks name the logical cluster, which no tenant can write');
  });

  it('copies a Backup, a type of another APIExport, into the workspace through the claim, and follows its changes', async () => {
    const copy = await svc.copyOf(copyNs('team-1'), 'orders-root-org-team-1');
    await putBackup(copyNs('team-1'), 'orders-backup', { schedule: 'daily' }, copy);
    const backup = await eventually('the Backup reaches the workspace', () => backupIn('root:org:team-1', 'orders-backup'), 30_000);
    assert.deepEqual(backup.spec, { schedule: 'daily' });
    await backupsSvc.patchNamespacedCustomObject({ ...BACKUPS, namespace: copyNs('team-1'), name: 'orders-backup', body: [{ op: 'replace', path: '/spec/schedule', value: 'hourly' }] });
    await eventually('its change follows', async () => (await backupIn('root:org:team-1', 'orders-backup'))?.spec?.schedule === 'hourly', 30_000);
    await backupsSvc.deleteNamespacedCustomObject({ ...BACKUPS, namespace: copyNs('team-1'), name: 'orders-backup' });
    await eventually('and its deletion (MatchOrigin)', async () => (await backupIn('root:org:team-1', 'orders-backup')) === undefined, 30_000);
  });

  it('never writes into a look-alike Backup type of the tenant\'s own export', async () => {
    const t3 = team('team-3');
    await t3.createDatabase('default', 'orders', {});
    const copy = await eventually('team-3\'s copy', () => svc.database(copyNs('team-3'), 'orders-root-org-team-3'), 60_000);
    await putBackup(copyNs('team-3'), 'orders-backup', { schedule: 'daily' }, copy);
    // The marker: relsync handled the Backup (the relation is stored, in error: kcp serves the claimed identity, which the workspace does not bind).
    const failed = await eventually('the Backup relation of team-3 is stored, not synced', async () => {
      const r = relation(lc['team-3'], 'backup');
      return r && r.state !== 'pending' ? r : undefined;
    }, 60_000);
    assert.notEqual(failed.state, 'synced', JSON.stringify(failed));
    assert.match(failed.message ?? '', /this workspace does not serve backups\.backup\.relsync\.dev of the export the APIExport's permission claim names/, 'the relation says why');
    const events = await t3.events('default', 'orders');
    assert.ok(events.some((e) => e.reason === 'RelatedSyncFailed' && /does not serve backups\.backup\.relsync\.dev/.test(e.message ?? '')), JSON.stringify(events));
    // kcp answers 429 for a moment while a type's storage (re)initializes
    const lookAlike = await eventually('the look-alike type listed', async () => {
      const res = await kcp.request<{ items: unknown[] }>('GET', `/clusters/root:org:team-3/apis/${BACKUPS.group}/${BACKUPS.version}/namespaces/default/${BACKUPS.plural}`);
      return res.status === 429 ? undefined : res;
    }, 30_000);
    assert.equal(lookAlike.status, 200, JSON.stringify(lookAlike.body));
    assert.deepEqual(lookAlike.body.items, [], 'nothing in the tenant\'s own type of the same name');
  });

  it('tells the tenant of a workspace that did not accept the LogicalCluster claim why, and syncs it once accepted', async () => {
    const t2 = team('team-2');
    await t2.createDatabase('default', 'orders', {});
    const events = await eventually('an Event names the claim', async () => {
      const found = await t2.events('default', 'orders');
      return found.some((e) => e.reason === 'WorkspacePathUnknown') ? found : undefined;
    }, 60_000);
    assert.match(events.find((e) => e.reason === 'WorkspacePathUnknown')!.message ?? '', /accept the APIExport's permission claim for logicalclusters\.core\.kcp\.io/);
    // The Event is written after the decision: nothing was copied, under any name.
    const databases = service.plane.service.kubeConfig.makeApiClient(CustomObjectsApi);
    const listed = (await databases.listNamespacedCustomObject({ group: 'demo.relsync.dev', version: 'v1alpha1', plural: 'databases', namespace: copyNs('team-2') })) as { items: unknown[] };
    assert.deepEqual(listed.items, []);
    const path = `/clusters/root:org:team-2/apis/apis.kcp.io/v1alpha2/apibindings/${EXPORT}`;
    const binding = (await kcp.request<{ spec: { permissionClaims: unknown[] } }>('GET', path)).body;
    binding.spec.permissionClaims.push({ group: 'core.kcp.io', resource: 'logicalclusters', verbs: ['*'], selector: { matchAll: true }, state: 'Accepted' });
    const res = await kcp.request('PUT', path, binding);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await eventually('copied once the claim is accepted (looked at again like a conflict)', () => svc.database(copyNs('team-2'), 'orders-root-org-team-2'), 90_000);
  });

  it('refuses to start with the identityHash of a look-alike export, which the export does not claim', async () => {
    const other = join(dir, 'wrong');
    mkdirSync(other);
    const wrong = writePublishedConfig(other, { platform: '', service: service.plane.service.kubeconfigPath }, manifest(lookAlikeIdentity), {
      platformClusters: [{ name: 'kcp', kubeconfig: join(dir, 'provider.kubeconfig'), kcp: { apiExportEndpointSlice: EXPORT } }],
      leaderElection: { enabled: false },
    });
    const out = await runCli(['sweep', '--config', wrong.configPath, '--log-level', 'error']);
    assert.equal(out.code, 2, out.stderr);
    assert.match(out.stderr, new RegExp(`\\(as resources\\[0\\]\\.related\\[0\\]\\.identityHash\\): the APIExport claims backups\\.backup\\.relsync\\.dev of the export with identity ${identity}, not of ${lookAlikeIdentity}: the claim and the rule must name one export`));
  });
});

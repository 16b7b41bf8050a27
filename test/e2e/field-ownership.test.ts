// Copies are written by server-side apply under relsync's field manager,
// against real API servers: relsync owns exactly the fields it copies. What
// the operator (any other writer) puts into a copy stays, nested or not; a
// field or label the primary drops goes from the copy; a field of relsync's
// that someone changed is set back. And a copy written by relsync before it
// applied its copies (owned by manager "unknown", carrying the old record of
// copied keys) is upgraded on its next write, so that a key its source drops
// afterwards goes too.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import type { ControlPlane } from '../harness/control-plane.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

type Tuning = { tuning?: Record<string, unknown>; size?: number };

/** A POST as relsync's own REST client sent it before it applied its copies: no field manager, no User-Agent. */
function postWithoutFieldManager(plane: ControlPlane, path: string, body: unknown): Promise<void> {
  const ca = readFileSync(join(plane.dir, 'certs', 'apiserver.crt'));
  return new Promise((resolve, reject) => {
    const req = https.request(`${plane.url}${path}`, { method: 'POST', ca, headers: { Authorization: `Bearer ${plane.token}`, 'Content-Type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => (res.statusCode === 201 ? resolve() : reject(new Error(`POST ${path}: ${res.statusCode} ${text}`))));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe('copies are applied (field ownership)', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;
  let configPath: string;
  let dir: string;
  const ns = defaultCopyNamespace('tenant-a', 'apply');

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-field-ownership-'));
    clusters = await startClusters('tenant-a', 'service');
    ({ 'tenant-a': a, service: svc } = clusters.client);
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      resync: { schedule: '0 0 1 1 *', onStartup: true },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [
        { id: 'settings', origin: 'platform', resource: 'configmaps', template: { name: '{{ name }}-settings' } },
      ] }],
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
    await a.ensureNamespace('apply');
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it("keeps the operator's fields, nested or not, removes what the primary dropped, and sets back relsync's own fields", async () => {
    await a.createDatabase('apply', 'orders', { size: 1, tuning: { cache: 'on', pool: 5 } }, { team: 'a', tier: 'gold' });
    await eventually('copied', async () => ((await svc.database(ns, 'orders'))?.spec as Tuning | undefined)?.tuning?.pool === 5, 30_000);
    // The operator writes into the copy (a PUT of its own: its fields are its own).
    await svc.updateDatabase(ns, 'orders', (db) => {
      (db.spec as Tuning).tuning!.operatorDefault = 'x';
      db.metadata.labels = { ...db.metadata.labels, 'operator.example/seen': 'yes' };
    });
    await a.updateDatabase('apply', 'orders', (db) => {
      db.spec = { size: 1, tuning: { cache: 'on' } };
      db.metadata.labels = { team: 'a' };
    });
    const copy = await eventually('the dropped field and label gone from the copy', async () => {
      const c = await svc.database(ns, 'orders');
      return c && (c.spec as Tuning).tuning?.pool === undefined && c.metadata.labels?.tier === undefined ? c : undefined;
    }, 30_000);
    assert.deepEqual(copy.spec, { size: 1, tuning: { cache: 'on', operatorDefault: 'x' } });
    assert.equal(copy.metadata.labels?.['operator.example/seen'], 'yes');
    assert.equal(copy.metadata.labels?.team, 'a');

    // Someone changes a field relsync owns: set back, the operator's field untouched.
    await svc.updateDatabase(ns, 'orders', (db) => void ((db.spec as Tuning).size = 99));
    const repaired = await eventually('drift repaired', async () => {
      const c = await svc.database(ns, 'orders');
      return (c?.spec as Tuning | undefined)?.size === 1 ? c : undefined;
    }, 30_000);
    assert.deepEqual(repaired.spec, { size: 1, tuning: { cache: 'on', operatorDefault: 'x' } });
  });

  it('upgrades a related copy written before relsync applied its copies: a key its source drops afterwards goes', async () => {
    await a.createDatabase('apply', 'legacy', { size: 1 });
    await svc.copyOf(ns, 'legacy');
    // relsync stopped; meanwhile the source appears and an older relsync wrote its copy (a POST without a field manager, with the old record of copied keys).
    await relsync.stop();
    await a.putConfigMap('apply', 'legacy-settings', { a: '1', b: '2' });
    const source = (await a.configMap('apply', 'legacy-settings'))!;
    await postWithoutFieldManager(clusters.plane.service, `/api/v1/namespaces/${ns}/configmaps`, {
      apiVersion: 'v1', kind: 'ConfigMap',
      metadata: { name: 'legacy-settings', labels: { 'relsync.dev/agent': 'e2e' }, annotations: {
        'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'configmaps', 'relsync.dev/source-namespace': 'apply',
        'relsync.dev/source-name': 'legacy-settings', 'relsync.dev/source-uid': source.metadata!.uid!, 'relsync.dev/content-hash': 'written-by-an-older-relsync',
        'relsync.dev/copied-labels': '', 'relsync.dev/copied-annotations': '',
      } },
      data: { a: '1', b: '2' },
    });
    const old = (await svc.configMap(ns, 'legacy-settings'))!;
    assert.deepEqual(old.metadata?.managedFields?.map((e) => `${e.manager} ${e.operation}`), ['unknown Update'], 'as an older relsync left it');
    relsync = await startRelsync(configPath, join(dir, 'relsync-2.log'));
    const upgraded = await eventually('the old copy applied once', async () => {
      const c = await svc.configMap(ns, 'legacy-settings');
      return c?.metadata?.annotations?.['relsync.dev/copied-labels'] === undefined ? c : undefined;
    }, 60_000);
    const entries = (upgraded.metadata?.managedFields ?? []).filter((e) => !e.subresource);
    assert.ok(entries.some((e) => e.manager === 'relsync-e2e' && e.operation === 'Apply'), 'relsync owns what it copied, as applied');
    // What "unknown" keeps is only what relsync cannot tell as its own (the maps' own entries), never the copied content.
    assert.ok(entries.filter((e) => e.manager === 'unknown').every((e) => !('f:data' in ((e.fieldsV1 ?? {}) as object))), JSON.stringify(entries));
    await a.putConfigMap('apply', 'legacy-settings', { a: '1' });
    const copy = await eventually('the dropped key gone', async () => {
      const c = await svc.configMap(ns, 'legacy-settings');
      return c && c.data?.b === undefined ? c : undefined;
    }, 30_000);
    assert.deepEqual(copy.data, { a: '1' });
  });
});

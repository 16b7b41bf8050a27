// relsync's verdict on the primary, where a user's tools read it: the
// relsync.dev/Synced condition (kubectl wait --for=condition) where the
// primary's status schema keeps conditions, annotations where it does not.
// Tried against what would break it: an operator whose copy status carries
// conditions (one of them of relsync's type), a conflict, a tenant forging the
// condition, a spec change (observedGeneration), a primary that is deselected.
// "Nothing more is written" is checked after a marker primary's verdict shows
// that relsync processed what came after.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { kubectlPath } from '../harness/control-plane.js';
import { eventually, installCrd } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, GROUP, VERSION, type ClusterClient, type Database } from '../harness/tenant.js';

const run = promisify(execFile);
const CONDITION = 'relsync.dev/Synced';
const WIDGETS = { group: GROUP, version: VERSION, plural: 'widgets' };

interface Condition { type: string; status: string; reason: string; message: string; observedGeneration?: number; lastTransitionTime: string }
type Obj = Database & { status?: { conditions?: Condition[]; phase?: string } };

const verdict = (o: Obj | undefined) => o?.status?.conditions?.find((c) => c.type === CONDITION);

/**
 * Widgets: a status subresource whose schema has a phase and no conditions (the API server prunes
 * them). Gadgets: cluster-scoped, with an open status.
 */
function crd(dir: string, kind: 'Widget' | 'Gadget'): URL {
  const plural = `${kind.toLowerCase()}s`;
  const path = join(dir, `${plural}-crd.json`);
  const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  const status = kind === 'Widget' ? { type: 'object', properties: { phase: { type: 'string' } } } : open;
  writeFileSync(path, JSON.stringify({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: kind === 'Widget' ? 'Namespaced' : 'Cluster',
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [{ name: VERSION, served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: { type: 'object', properties: { spec: open, status } } } }],
    },
  }));
  return pathToFileURL(path);
}

describe('relsync\'s verdict on the primary', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;
  let dir: string;
  let configPath: string;

  const kubectl = (...args: string[]) => run(kubectlPath(), ['--kubeconfig', clusters.plane['tenant-a'].kubeconfigPath, ...args], { encoding: 'utf8' });
  const widget = async (c: ClusterClient, namespace: string, name: string): Promise<Obj | undefined> => {
    try {
      return (await c.objects.getNamespacedCustomObject({ ...WIDGETS, namespace, name })) as Obj;
    } catch {
      return undefined;
    }
  };
  const createWidget = (c: ClusterClient, namespace: string, name: string, spec: Record<string, unknown>) =>
    c.objects.createNamespacedCustomObject({ ...WIDGETS, namespace, body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Widget', metadata: { name }, spec } });
  const editWidget = async (c: ClusterClient, namespace: string, name: string, edit: (w: Obj) => void, status = false) => {
    for (let attempt = 0; ; attempt++) {
      const w = (await widget(c, namespace, name))!;
      edit(w);
      try {
        const args = { ...WIDGETS, namespace, name, body: w };
        await (status ? c.objects.replaceNamespacedCustomObjectStatus(args) : c.objects.replaceNamespacedCustomObject(args));
        return;
      } catch (err) {
        if ((err as { code?: number }).code !== 409 || attempt > 5) throw err;
      }
    }
  };
  /** A new primary in `namespace`, synced: proof that relsync processed what was queued before it. */
  let markers = 0;
  const marker = async (namespace: string) => {
    const name = `marker-${++markers}`;
    await a.createDatabase(namespace, name, { marker: true }, { sync: 'yes' });
    await eventually(`the marker ${name} is synced`, async () => verdict(await a.database(namespace, name))?.status === 'True', 30_000);
    return name;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-verdict-'));
    clusters = await startClusters('tenant-a', 'service');
    ({ 'tenant-a': a, service: svc } = clusters.client);
    await Promise.all([clusters.plane['tenant-a'], clusters.plane.service].flatMap((p) => [installCrd(p.kubeConfig, crd(dir, 'Widget')), installCrd(p.kubeConfig, crd(dir, 'Gadget'))]));
    configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      resources: [
        { group: GROUP, version: VERSION, resource: 'databases', selector: { matchLabels: { sync: 'yes' } } },
        { group: GROUP, version: VERSION, resource: 'widgets' },
        { group: GROUP, version: VERSION, resource: 'gadgets' },
      ],
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('kubectl wait sees the condition; it stays beside the operator\'s status and conditions, never taken from them, and an unchanged verdict writes nothing', async () => {
    await a.ensureNamespace('shop');
    await a.createDatabase('shop', 'orders', { size: 'small' }, { sync: 'yes' });
    const waited = await kubectl('wait', '-n', 'shop', `--for=condition=${CONDITION}`, 'databases.demo.relsync.dev/orders', '--timeout=60s');
    assert.match(waited.stdout, /condition met/);
    const synced = (await a.database('shop', 'orders')) as Obj;
    assert.deepEqual({ ...verdict(synced), lastTransitionTime: 'x' }, { type: CONDITION, status: 'True', reason: 'Synced', message: 'the copy in the service cluster and every related object are in sync', observedGeneration: synced.metadata.generation, lastTransitionTime: 'x' });

    // The operator's status, with a condition of relsync's type that is not relsync's.
    const copyNs = defaultCopyNamespace('tenant-a', 'shop');
    const ready = { type: 'Ready', status: 'True', reason: 'Provisioned', message: 'up', lastTransitionTime: '2026-01-01T00:00:00Z' };
    await svc.updateDatabase(copyNs, 'orders', (db) => void (db.status = { phase: 'Ready', conditions: [ready, { type: CONDITION, status: 'False', reason: 'Forged', message: 'by the operator', lastTransitionTime: '2026-01-01T00:00:00Z' }] }), 'status');
    const copied = await eventually('the operator\'s status on the primary', async () => {
      const p = (await a.database('shop', 'orders')) as Obj | undefined;
      return p?.status?.phase === 'Ready' ? p : undefined;
    }, 30_000);
    assert.deepEqual(copied.status?.conditions?.map((c) => `${c.type}=${c.status}/${c.reason}`), ['Ready=True/Provisioned', `${CONDITION}=True/Synced`]);
    assert.equal(verdict(copied)?.lastTransitionTime, verdict(synced)?.lastTransitionTime, 'no transition');

    const markerName = await marker('shop');
    const later = (await a.database('shop', 'orders')) as Obj;
    assert.equal(later.metadata.resourceVersion, copied.metadata.resourceVersion, 'nothing written to the primary since: relsync and the operator do not take turns');
    // One loop writes a cluster's Events in order: once the marker's is there, every one before it is.
    await eventually('the marker\'s Synced Event', async () => (await a.events('shop', markerName)).some((e) => e.reason === 'Synced'), 30_000);
    const normal = (await a.events('shop', 'orders')).filter((e) => e.reason === 'Synced');
    assert.equal(normal.length, 1, 'one Normal Event for the first sync, none for the status copies');
    assert.equal((normal[0] as { count?: number; type?: string }).count, 1);
    assert.equal((normal[0] as { type?: string }).type, 'Normal');
  });

  it('a conflict shows as False with its reason, a tenant\'s forged True is set back, and the resolved sync shows the new generation', async () => {
    await a.ensureNamespace('blocked');
    await marker('blocked');
    const copyNs = defaultCopyNamespace('tenant-a', 'blocked');
    await svc.createDatabase(copyNs, 'orders', { theirs: true });
    await a.createDatabase('blocked', 'orders', { size: 'small' }, { sync: 'yes' });
    const conflicted = await eventually('the conflict on the primary', async () => {
      const p = (await a.database('blocked', 'orders')) as Obj | undefined;
      return verdict(p)?.status === 'False' ? p : undefined;
    }, 30_000);
    assert.equal(verdict(conflicted)?.reason, 'CopyConflict');
    assert.match(verdict(conflicted)!.message, /exists and was not created by relsync agent "e2e"/);
    assert.equal(verdict(conflicted)?.observedGeneration, 1);

    // The tenant writes True on its own object: relsync's next look sets it back.
    await a.updateDatabase('blocked', 'orders', (db) => {
      const s = (db as Obj).status!;
      s.conditions = s.conditions!.map((c) => (c.type === CONDITION ? { ...c, status: 'True', reason: 'Synced', message: 'forged' } : c));
    }, 'status');
    await eventually('the forged True is set back', async () => verdict((await a.database('blocked', 'orders')) as Obj)?.reason === 'CopyConflict', 30_000);
    // That second look said the conflict again: the Event recorded first counts it (client-go's correlator), no second Event.
    const repeated = await eventually('the conflict Event counted twice', async () => {
      const e = (await a.events('blocked', 'orders')).filter((x) => x.reason === 'CopyConflict');
      return e.length === 1 && ((e[0] as { count?: number }).count ?? 0) >= 2 ? e : undefined;
    }, 30_000);
    assert.equal(repeated.length, 1);

    await svc.deleteDatabase(copyNs, 'orders');
    await eventually('the blocker is gone', async () => !(await svc.database(copyNs, 'orders')), 30_000);
    await a.updateDatabase('blocked', 'orders', (db) => void (db.spec = { size: 'large' }));
    const resolved = await eventually('synced at generation 2', async () => {
      const p = (await a.database('blocked', 'orders')) as Obj | undefined;
      return verdict(p)?.status === 'True' ? p : undefined;
    }, 30_000);
    assert.equal(resolved.metadata.generation, 2);
    assert.equal(verdict(resolved)?.observedGeneration, 2);
    assert.ok(verdict(resolved)!.lastTransitionTime >= verdict(conflicted)!.lastTransitionTime);
    assert.equal((await svc.database(copyNs, 'orders'))?.spec?.size, 'large');
  });

  it('a schema without status.conditions gets annotations (kubectl wait on the generation), and the copied status is kept', async () => {
    await a.ensureNamespace('widgets');
    await createWidget(a, 'widgets', 'w1', { color: 'blue' });
    const first = await eventually('annotations on the widget', async () => {
      const w = await widget(a, 'widgets', 'w1');
      return w?.metadata.annotations?.['relsync.dev/synced-generation'] === '1' ? w : undefined;
    }, 30_000);
    assert.match(first.metadata.annotations?.['relsync.dev/synced-at'] ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(first.status?.conditions, undefined, 'no condition where the schema keeps none');

    const copyNs = defaultCopyNamespace('tenant-a', 'widgets');
    await eventually('the widget\'s copy', () => widget(svc, copyNs, 'w1'), 30_000);
    await editWidget(svc, copyNs, 'w1', (w) => void (w.status = { phase: 'Ready' }), true);
    await eventually('the copy\'s status on the primary', async () => (await widget(a, 'widgets', 'w1'))?.status?.phase === 'Ready', 30_000);

    await editWidget(a, 'widgets', 'w1', (w) => void (w.spec = { color: 'red' }));
    await kubectl('wait', '-n', 'widgets', '--for=jsonpath={.metadata.annotations.relsync\\.dev/synced-generation}=2', 'widgets.demo.relsync.dev/w1', '--timeout=60s');

    // A conflict: the problem is recorded, the last complete sync stays; resolved, the problem goes.
    await createWidget(svc, copyNs, 'w2', { theirs: true });
    await createWidget(a, 'widgets', 'w2', { color: 'green' });
    const blocked = await eventually('the problem on w2', async () => {
      const w = await widget(a, 'widgets', 'w2');
      return w?.metadata.annotations?.['relsync.dev/sync-problem'] ? w : undefined;
    }, 30_000);
    assert.match(blocked.metadata.annotations!['relsync.dev/sync-problem']!, /^CopyConflict: .*not created by relsync agent "e2e"/);
    assert.equal(blocked.metadata.annotations?.['relsync.dev/synced-generation'], undefined, 'never synced');
    await svc.objects.deleteNamespacedCustomObject({ ...WIDGETS, namespace: copyNs, name: 'w2' });
    await eventually('the blocker is gone', async () => !(await widget(svc, copyNs, 'w2')), 30_000);
    await editWidget(a, 'widgets', 'w2', (w) => void (w.spec = { color: 'yellow' }));
    const resolved = await eventually('w2 synced', async () => {
      const w = await widget(a, 'widgets', 'w2');
      return w?.metadata.annotations?.['relsync.dev/synced-generation'] === '2' ? w : undefined;
    }, 30_000);
    assert.equal(resolved.metadata.annotations?.['relsync.dev/sync-problem'], undefined);
    assert.equal((await widget(a, 'widgets', 'w1'))?.status?.phase, 'Ready', 'the copied status is still there');
  });

  it('a cluster-scoped primary gets its Events (in the default namespace) and its condition', async () => {
    const gadgets = { group: GROUP, version: VERSION, plural: 'gadgets' };
    // Its copy's place taken in the service cluster: a conflict, said by Event and condition.
    await svc.objects.createClusterCustomObject({ ...gadgets, body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Gadget', metadata: { name: 'g1' }, spec: { theirs: true } } });
    await a.objects.createClusterCustomObject({ ...gadgets, body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Gadget', metadata: { name: 'g1' }, spec: { size: 1 } } });
    const event = await eventually('the Event of g1', async () => (await a.events('default', 'g1')).find((e) => e.reason === 'CopyConflict'), 30_000);
    assert.match(event.message ?? '', /not created by relsync agent "e2e"/);
    // The Event is written in the background: the condition may land before or after it.
    await eventually('the condition of g1', async () => verdict((await a.objects.getClusterCustomObject({ ...gadgets, name: 'g1' })) as Obj)?.reason === 'CopyConflict', 30_000);
  });

  it('a primary relsync no longer syncs (deselected) keeps no verdict of relsync\'s', async () => {
    await a.ensureNamespace('leaving');
    await a.createDatabase('leaving', 'orders', { size: 'small' }, { sync: 'yes' });
    await eventually('synced', async () => verdict((await a.database('leaving', 'orders')) as Obj)?.status === 'True', 30_000);
    await a.updateDatabase('leaving', 'orders', (db) => void (db.metadata.labels = {}));
    const released = await eventually('released: no finalizer', async () => {
      const p = (await a.database('leaving', 'orders')) as Obj | undefined;
      return p && !p.metadata.finalizers?.length ? p : undefined;
    }, 30_000);
    assert.equal(verdict(released), undefined);
  });

  it('relsync explain says why, for a synced primary, a conflict, a deselected primary, a copy and a type relsync does not sync', async () => {
    const explain = async (...args: string[]) => {
      const out = await runCli(['explain', ...args, '--config', configPath]);
      assert.equal(out.code, 0, out.stderr);
      return out.stdout;
    };
    const synced = await explain('databases.demo.relsync.dev', 'shop/orders');
    assert.match(synced, /^why: synced \(last complete sync /m);
    assert.match(synced, /primary in tenant-a: synced; copy service:/);
    assert.match(synced, /condition relsync\.dev\/Synced=True \(Synced/);

    const conflict = await explain('gadgets.demo.relsync.dev', 'g1');
    assert.match(conflict, /^why: conflict: service:gadgets\.demo\.relsync\.dev:g1 exists and was not created by relsync agent "e2e"/m);
    assert.match(conflict, /condition relsync\.dev\/Synced=False \(CopyConflict/);

    const deselected = await explain('databases.demo.relsync.dev', 'leaving/orders', '--cluster', 'tenant-a');
    assert.match(deselected, /^why: it is not selected: resources\[0\]\.selector leaves it out/m);

    const copy = await explain('databases.demo.relsync.dev', `${defaultCopyNamespace('tenant-a', 'shop')}/orders`, '--cluster', 'service');
    assert.match(copy, /^why: it is relsync's copy of tenant-a:/m);

    const other = await explain('configmaps', 'shop/settings');
    assert.match(other, /^why: no resource or rule of the config is of this type/m);

    const json = JSON.parse(await explain('databases.demo.relsync.dev', 'shop/orders', '-o', 'json')) as { why: string; apiServer: Array<{ cluster: string }> };
    assert.match(json.why, /^synced/);
    assert.ok(json.apiServer.some((a) => a.cluster === 'tenant-a'));
  });

  it('relsync sweep --dry-run prints what a sweep would repair, create and delete, and writes nothing, to the API servers or the store', async () => {
    // Changes while relsync is stopped: a new primary, a copy someone changed.
    await relsync.stop();
    const copyNs = defaultCopyNamespace('tenant-a', 'shop');
    await a.createDatabase('shop', 'offline', { size: 'tiny' }, { sync: 'yes' });
    await svc.updateDatabase(copyNs, 'orders', (db) => void (db.spec = { ...db.spec, size: 'tampered' }));
    const storeBefore = await runCli(['inspect', 'primary', 'databases.demo.relsync.dev', 'shop/offline', '--config', configPath]);

    const text = await runCli(['sweep', '--dry-run', '--config', configPath]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, new RegExp(`^~ update service:databases\\.demo\\.relsync\\.dev:${copyNs}/orders\n    spec\\.size: "tampered" → "small"$`, 'm'));
    assert.match(text.stdout, new RegExp(`^\\+ create service:databases\\.demo\\.relsync\\.dev:${copyNs}/offline$`, 'm'));
    assert.match(text.stdout, /^~ update tenant-a:databases\.demo\.relsync\.dev:shop\/offline\n( {4}.*\n)* {4}metadata\.finalizers: \(none\) → \["relsync\.dev\/e2e"\]$/m);
    assert.match(text.stdout, /nothing was written$/m);
    const json = JSON.parse((await runCli(['sweep', '--dry-run', '-o', 'json', '--config', configPath])).stdout) as { changes: Array<{ action: string; object: string }> };
    assert.ok(json.changes.some((c) => c.action === 'create' && c.object === `service:databases.demo.relsync.dev:${copyNs}/offline`));

    // Nothing landed: no copy, the drift still there, the primary without relsync's finalizer, the store as it was.
    assert.equal(await svc.database(copyNs, 'offline'), undefined);
    assert.equal((await svc.database(copyNs, 'orders'))?.spec?.size, 'tampered');
    assert.deepEqual((await a.database('shop', 'offline'))?.metadata.finalizers ?? [], []);
    assert.equal((await runCli(['inspect', 'primary', 'databases.demo.relsync.dev', 'shop/offline', '--config', configPath])).stdout, storeBefore.stdout);

    // The real sweep does what the dry run said.
    const swept = await runCli(['sweep', '--config', configPath]);
    assert.equal(swept.code, 0, swept.stderr);
    assert.equal((await svc.database(copyNs, 'orders'))?.spec?.size, 'small');
    assert.ok(await svc.database(copyNs, 'offline'));
    // And then there is nothing left to do: a dry run over the converged system says so.
    const after = await runCli(['sweep', '--dry-run', '--config', configPath]);
    assert.equal(after.code, 0, after.stderr);
    assert.equal(after.stdout.trim(), '0 changes (0 create, 0 update, 0 delete); nothing was written');
  });
});

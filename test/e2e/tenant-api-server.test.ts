// Hostile tenants, round two (issue #36, point 9): what a tenant can make its own platform API
// server hold or answer. Tenant-a plays the tenant; tenant-b is the one who must not notice, its
// related change a marker that proves relsync went on working after tenant-a's input was processed.
// Each case runs its own relsync, as deploy/ runs it (its heap cap), against the same clusters;
// tenant-a is reached through a fault proxy, which can rewrite what its API server answers.
//
// - objects nested thousands of levels deep (the example CRD preserves unknown fields): a primary
//   and a related object, which overflowed the stack of relsync's recursive walks;
// - a probe: a related rule's destination name that the provider's own object holds in the service
//   cluster, answered as a name refused for another reason is;
// - an API server that answers every page of a LIST with another continue token.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import BetterSqlite3 from 'better-sqlite3';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import type { ControlPlane } from '../harness/control-plane.js';
import { startFaultProxy, type FaultProxy } from '../harness/fault-proxy.js';
import { eventually, installCrd } from '../harness/kube.js';
import { asDeployed, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient, type Database } from '../harness/tenant.js';

type Names = 'tenant-a' | 'tenant-b' | 'service';
const DEPLOYED = asDeployed();
/**
 * Levels of a nested field: kube-apiserver v1.36.3 accepts a custom resource whose spec holds up to
 * 9,993 (its managed fields reach 10,000, Go's JSON limit); V8's JSON.stringify overflows the stack
 * at about 4,500, relsync's recursive walks sooner.
 */
const DEPTH = 9_000;
/** A related type of tenant-a's own making that keeps whatever it is given (the example CRD's spec does too). */
const SETTINGS = { group: 'hostile.relsync.dev', version: 'v1', plural: 'settings' };
const CONDITION = 'relsync.dev/Synced';

type Condition = { type: string; status: string; reason?: string; message?: string };
const verdict = (o: Database | undefined) => (o?.status?.conditions as Condition[] | undefined)?.find((c) => c.type === CONDITION);

/** `{"a":{"a":…{"a":"bottom"}…}}`, `depth` objects deep, as text: JSON.stringify (client-node's too) overflows the stack on it. */
function nested(depth: number): string {
  return `${'{"a":'.repeat(depth - 1)}{"a":"bottom"}${'}'.repeat(depth - 1)}`;
}

/** A request with the control plane's admin token, the body as text (client-node would serialize and walk it). */
async function request(plane: ControlPlane, method: string, path: string, text?: string): Promise<{ status: number; body: string }> {
  const ca = readFileSync(join(plane.dir, 'certs', 'apiserver.crt'));
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = https.request(`${plane.url}${path}`, { method, ca, headers: { authorization: `Bearer ${plane.token}`, 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.once('error', reject);
    req.end(text);
  });
}

async function createFromText(plane: ControlPlane, path: string, text: string): Promise<void> {
  const answer = await request(plane, 'POST', path, text);
  if (answer.status !== 201) throw new Error(`POST ${path}: ${answer.status} ${answer.body.slice(0, 300)}`);
}

/** A Database read as text and parsed by JSON.parse, which does not recurse. */
async function databaseOf(plane: ControlPlane, namespace: string, name: string): Promise<Database | undefined> {
  const answer = await request(plane, 'GET', `/apis/demo.relsync.dev/v1alpha1/namespaces/${namespace}/databases/${name}`);
  return answer.status === 200 ? (JSON.parse(answer.body) as Database) : undefined;
}

function settingsCrd(dir: string): URL {
  const path = join(dir, 'settings-crd.json');
  const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  writeFileSync(path, JSON.stringify({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${SETTINGS.plural}.${SETTINGS.group}` },
    spec: {
      group: SETTINGS.group,
      scope: 'Namespaced',
      names: { plural: SETTINGS.plural, singular: 'setting', kind: 'Setting', listKind: 'SettingList' },
      versions: [{ name: SETTINGS.version, served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: open } } } }],
    },
  }));
  return pathToFileURL(path);
}

describe("hostile tenants, round two: a tenant's own API server", () => {
  let clusters: Clusters<Names>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;
  let proxy: FaultProxy;
  let relsync: RelsyncProcess | undefined;

  /** A relsync of its own for one case: its store in a new folder, tenant-a through the proxy. */
  const start = async (name: string, extra: Record<string, unknown> = {}): Promise<{ relsync: RelsyncProcess; dir: string }> => {
    const dir = mkdtempSync(join(tmpdir(), `relsync-e2e-tenant-api-${name}-`));
    const configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [
        { name: 'tenant-a', kubeconfig: proxy.kubeconfigPath },
        { name: 'tenant-b', kubeconfig: clusters.plane['tenant-b'].kubeconfigPath },
      ],
      serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      resync: { schedule: '0 0 1 1 *', onStartup: true },
      resources: [{
        group: 'demo.relsync.dev', resource: 'databases',
        related: [
          { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
          { id: 'setting', origin: 'platform', group: SETTINGS.group, resource: SETTINGS.plural, reference: { path: '.spec.settingName' } },
        ],
      }],
      ...extra,
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'), [], DEPLOYED);
    return { relsync, dir };
  };
  const stop = async () => {
    if (relsync?.child.exitCode === null) await relsync.stop();
    relsync = undefined;
  };

  /** Tenant-b changes its ConfigMap; resolves with the time it took to arrive in the service cluster. */
  let marks = 0;
  const bArrives = async (timeoutMs = 30_000): Promise<number> => {
    const value = `mark-${++marks}`;
    const at = Date.now();
    await b.putConfigMap('app', 'cfg', { v: value });
    await eventually(`tenant-b's change ${value}`, async () => (await svc.configMap(defaultCopyNamespace('tenant-b', 'app'), 'cfg'))?.data?.v === value || undefined, timeoutMs);
    return Date.now() - at;
  };

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-tenant-api-'));
    clusters = await startClusters('tenant-a', 'tenant-b', 'service');
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = clusters.client);
    const crd = settingsCrd(dir);
    await Promise.all(Object.values(clusters.plane).map((p) => installCrd(p.kubeConfig, crd)));
    proxy = await startFaultProxy(clusters.plane['tenant-a'], 'tenant-a');
    await b.ensureNamespace('app');
    await b.putConfigMap('app', 'cfg', { v: 'start' });
    await b.createDatabase('app', 'orders', { configMapName: 'cfg' });
  });

  after(async () => {
    await stop();
    await proxy?.close();
    await clusters?.stop();
  });

  it(`objects nested ${DEPTH} levels deep, a primary and a related object: each is refused on its own, the watches go on`, async () => {
    const { relsync } = await start('deep');
    try {
      await svc.copyOf(defaultCopyNamespace('tenant-b', 'app'), 'orders', 60_000);
      const idle = await bArrives();
      await a.ensureNamespace('deep');
      const plane = clusters.plane['tenant-a'];
      await createFromText(plane, `/apis/${SETTINGS.group}/${SETTINGS.version}/namespaces/deep/${SETTINGS.plural}`, `{"apiVersion":"${SETTINGS.group}/${SETTINGS.version}","kind":"Setting","metadata":{"name":"deep-setting"},"spec":${nested(DEPTH)}}`);
      await a.createDatabase('deep', 'holder', { settingName: 'deep-setting' });
      await createFromText(plane, '/apis/demo.relsync.dev/v1alpha1/namespaces/deep/databases', `{"apiVersion":"demo.relsync.dev/v1alpha1","kind":"Database","metadata":{"name":"deep"},"spec":{"nested":${nested(DEPTH)}}}`);
      // Each says what is wrong on its own primary: the deep one, and the one whose related object is deep.
      const deep = await eventually('the deep primary says why it is not synced', async () => {
        const shown = verdict(await databaseOf(plane, 'deep', 'deep'));
        return shown?.status === 'False' && shown;
      }, 60_000);
      assert.match(deep.message ?? '', /nested deeper than \d+ levels/);
      const holder = await eventually('the primary of the deep related object says why', async () => {
        const shown = verdict(await a.database('deep', 'holder'));
        return shown?.status === 'False' && shown;
      }, 60_000);
      assert.equal(holder.reason, 'RelatedSyncFailed');
      assert.match(holder.message ?? '', /deep-setting.*nested deeper than \d+ levels/);
      const events = [...(await a.events('deep', 'deep')), ...(await a.events('deep', 'holder'))];
      assert.ok(events.some((e) => /nested deeper than/.test(e.message ?? '')), `an Event says so (${JSON.stringify(events.map((e) => e.reason))})`);
      // The marker: tenant-b's change made after both were refused arrives, through the same watches.
      const during = await bArrives();
      // A relist meets both again (a watch cut with 410 Gone): still refused, and the watch goes on.
      const cut = proxy.inject({ method: 'GET', path: /\/apis\/demo\.relsync\.dev\/v1alpha1\/databases$/, query: /watch=true/, times: 1, action: { kind: 'status', status: 410 } });
      proxy.cut(/\/apis\/demo\.relsync\.dev\/v1alpha1\/databases$/);
      await relsync.waitForLog('the relist after 410', /resourceVersion expired \(410 Gone\); relisting/, 30_000);
      cut();
      await a.putConfigMap('deep', 'after', { v: '1' });
      await a.createDatabase('deep', 'after', { configMapName: 'after' });
      await eventually("tenant-a's next primary is synced after the relist", () => svc.configMap(defaultCopyNamespace('tenant-a', 'deep'), 'after'), 60_000);
      const afterRelist = await bArrives();
      const log = relsync.log();
      assert.equal(relsync.child.exitCode, null, 'relsync is still running');
      assert.doesNotMatch(log, /Maximum call stack size exceeded/);
      assert.doesNotMatch(log, /handler threw/, 'no watch handler failed');
      assert.doesNotMatch(log, /"msg":"reconcile failed/, 'neither refusal is retried as a failure');
      console.log(`depth ${DEPTH}: both refused with a reason on their primaries; tenant-b's change arrived in ${idle} ms idle, ${during} ms after, ${afterRelist} ms after a relist`);
    } finally {
      await stop();
    }
  });

  it("a probe: a destination name the provider's own object holds reads to the tenant as a name refused for another reason", async () => {
    const copyNs = defaultCopyNamespace('tenant-a', 'probe');
    // The provider reserves names for its operator: a ValidatingAdmissionPolicy forbids ConfigMaps named reserved-* (403).
    const policy = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', metadata: { name: 'reserved-names' },
      spec: { failurePolicy: 'Fail', matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }] },
        validations: [{ expression: "!object.metadata.name.startsWith('reserved-')", message: 'names reserved-* are the operator\'s', reason: 'Forbidden' }] } };
    const binding = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', metadata: { name: 'reserved-names' }, spec: { policyName: 'reserved-names', validationActions: ['Deny'] } };
    for (const body of [policy, binding]) {
      await svc.objects.createClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural: body.kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings', body });
    }
    const { relsync, dir } = await start('probe');
    try {
      await a.ensureNamespace('probe');
      await a.createDatabase('probe', 'anchor', {});
      await svc.copyOf(copyNs, 'anchor', 60_000);
      // The operator's own object in the tenant's copy namespace, without relsync's marks.
      await svc.putConfigMap(copyNs, 'provider-cfg', { password: 'operator' });
      await eventually('the policy is in force', async () => {
        try {
          await svc.putConfigMap(copyNs, 'reserved-probe', { v: '1' });
          await svc.deleteConfigMap(copyNs, 'reserved-probe');
          return false;
        } catch (err) {
          return (err as { code?: number }).code === 403;
        }
      });
      for (const name of ['provider-cfg', 'reserved-cfg']) await a.putConfigMap('probe', name, { v: 'tenant' });
      await a.createDatabase('probe', 'p-exists', { configMapName: 'provider-cfg' });
      await a.createDatabase('probe', 'p-reserved', { configMapName: 'reserved-cfg' });
      // What the tenant can see of each: its primary's verdict and Events, and the relation as stored (names replaced).
      const seen = async (primary: string, name: string) => {
        const norm = (text: string | undefined) => (text ?? '').replaceAll(name, '<name>').replaceAll(primary, '<primary>');
        const shown = await eventually(`${primary}'s verdict`, async () => {
          const v = verdict(await a.database('probe', primary));
          return v?.status === 'False' && v;
        }, 60_000);
        const events = await eventually(`${primary}'s Event`, async () => {
          const warnings = (await a.events('probe', primary)).filter((e) => e.reason !== 'Synced');
          return warnings.length > 0 && warnings;
        }, 30_000);
        const db = new BetterSqlite3(join(dir, 'relsync.db'), { readonly: true });
        try {
          const row = db.prepare("select state, message from relations where primary_namespace = 'probe' and primary_name = ? and rule_id = 'config'").get(primary) as { state: string; message: string };
          return { state: row.state, relation: norm(row.message), reason: shown.reason, condition: norm(shown.message), events: events.map((e) => `${e.reason}: ${norm(e.message)}`) };
        } finally {
          db.close();
        }
      };
      const exists = await seen('p-exists', 'provider-cfg');
      const reserved = await seen('p-reserved', 'reserved-cfg');
      assert.deepEqual(exists, reserved, 'an existing object of the provider\'s and a name the service cluster refuses read the same');
      assert.equal((await svc.configMap(copyNs, 'provider-cfg'))?.data?.password, 'operator', "the operator's object is untouched");
      assert.equal(await svc.configMap(copyNs, 'reserved-cfg'), undefined);
      // The provider's log says which.
      await relsync.waitForLog('why provider-cfg was refused', (l) => l.includes(`${copyNs}/provider-cfg`) && l.includes('"why":') && /relsync's copy/.test(l));
      await relsync.waitForLog('why reserved-cfg was refused', (l) => l.includes(`${copyNs}/reserved-cfg`) && l.includes('"why":') && /reserved-\* are the operator's/.test(l));
      console.log(`what tenant-a sees of either: ${JSON.stringify(exists)}`);
    } finally {
      await stop();
      await svc.objects.deleteClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural: 'validatingadmissionpolicybindings', name: 'reserved-names' });
      await svc.objects.deleteClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural: 'validatingadmissionpolicies', name: 'reserved-names' });
    }
  });

  it('an API server that answers every LIST page with another continue token: each LIST ends at limits.listPages and is taken again with backoff; the other tenant syncs', async () => {
    const PAGES = 20;
    await a.ensureNamespace('endless');
    await a.putConfigMap('endless', 'cfg', { v: '1' });
    await a.createDatabase('endless', 'orders', { configMapName: 'cfg' });
    // Every LIST of tenant-a's, from the first one on (watches stream through).
    const endless = proxy.inject({ method: 'GET', action: { kind: 'endless' } });
    const { relsync } = await start('endless', { limits: { listPages: PAGES } });
    try {
      const databases = '/apis/demo.relsync.dev/v1alpha1/databases';
      const capped = (l: string) => l.includes('"msg":"list/watch failed; retrying"') && l.includes(`tenant-a/databases.demo.relsync.dev"`) && l.includes(`not complete after ${PAGES} pages`);
      await relsync.waitForLog('the LIST of databases ended at the cap', capped, 60_000);
      await svc.copyOf(defaultCopyNamespace('tenant-b', 'app'), 'orders', 60_000);
      const during = await bArrives();
      // A second attempt, after the backoff, ends the same way.
      await eventually('a second LIST ended at the cap', async () => relsync.log().split('\n').filter(capped).length >= 2 || undefined, 60_000);
      const failures = relsync.log().split('\n').filter(capped);
      // Every LIST of databases that ended at the cap: the watch's, and the startup sweep's.
      const lists = relsync.log().split('\n').filter((l) => l.includes(`LIST ${databases} of tenant-a: not complete after ${PAGES} pages`)).length;
      const pages = proxy.requests.filter((r) => r.path === databases && r.fault === 'endless' && !/watch=/.test(r.query)).length;
      // Each LIST takes at most PAGES pages; the watch's next one may be on its way.
      assert.ok(pages <= (lists + 1) * PAGES, `${pages} pages for ${lists} capped LISTs`);
      const delays = failures.map((l) => (JSON.parse(l) as { retryInMs: number }).retryInMs);
      assert.ok(delays.every((d) => d > 0), `each retried after a backoff (${delays.join(', ')} ms)`);
      assert.equal(relsync.child.exitCode, null, 'relsync is still running');
      // The API server answers again: tenant-a's primary is synced at the next attempt.
      endless();
      await eventually("tenant-a's related ConfigMap copied once its LISTs end", () => svc.configMap(defaultCopyNamespace('tenant-a', 'endless'), 'cfg'), 90_000);
      console.log(`limits.listPages ${PAGES}: ${failures.length} LISTs ended at the cap (${pages} pages through the proxy, retried after ${delays.join(', ')} ms); tenant-b's change arrived in ${during} ms meanwhile`);
    } finally {
      endless();
      await stop();
    }
  });
});

// Related copies' cleanup policies, driven by an api-syncagent PublishedResource manifest: the
// behaviours of api-syncagent's own cleanup tests (Orphan by default, OnPrimaryDeletion through the
// deprecated `cleanup: true`, MatchOrigin for both origins, a teardown that reclaims a copy whose
// origin went just before), and what a hostile or unlucky world adds: two rules of one type with
// different policies, a released copy that must never be taken back silently, and a store lost
// while the primary was deleted by hand.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, writePublishedConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const MANIFEST = `
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: publish-databases
spec:
  resource: { apiGroup: demo.relsync.dev, versions: [v1alpha1], kind: Database }
  related:
    # no policy: api-syncagent's default, Orphan
    - identifier: orphan
      origin: service
      kind: Secret
      object:
        template:
          template: "{{ .Object.metadata.name }}-orphan"
    # the deprecated spelling of OnPrimaryDeletion
    - identifier: ondelete
      origin: service
      kind: Secret
      cleanup: true
      object:
        selector:
          matchLabels: { app: "{{ .Object.metadata.name }}-ondelete" }
          rewrite: { template: { template: "{{ .Value }}" } }
    - identifier: match
      origin: service
      kind: ConfigMap
      cleanupPolicy: MatchOrigin
      object:
        selector:
          matchLabels: { app: "{{ .Object.metadata.name }}-match" }
          rewrite: { template: { template: "{{ .Value }}" } }
    # a reference the tenant can point anywhere (Orphan): what it leaves behind is bounded
    - identifier: pick
      origin: service
      kind: Secret
      object:
        reference:
          path: spec.pick
    - identifier: settings
      origin: kcp
      kind: ConfigMap
      cleanupPolicy: MatchOrigin
      object:
        selector:
          matchLabels: { app: "{{ .Object.metadata.name }}-settings" }
          rewrite: { template: { template: "{{ .Value }}" } }
`;

const NS = 'clean';
const AGENT_LABEL = 'relsync.dev/agent';

describe('cleanup policies of related copies (a PublishedResource manifest)', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let dir: string;
  let configPath: string;
  let dbPath: string;
  let relsync: RelsyncProcess;
  const copyNs = defaultCopyNamespace('tenant-a', NS);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-cleanup-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    ({ configPath, dbPath } = writePublishedConfig(dir, { platform: pa.kubeconfigPath, service: ps.kubeconfigPath }, MANIFEST, { limits: { relatedPerPrimary: 4 } }));
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
    await a.ensureNamespace(NS);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  /** A primary synced, and its copy in the service cluster (what the operator's objects are owned by). */
  async function primary(name: string) {
    await a.createDatabase(NS, name, {});
    return svc.copyOf(copyNs, name);
  }

  async function relation(name: string, rule: string, source: string): Promise<{ state: string; message: string } | undefined> {
    const out = await runCli(['inspect', 'primary', 'databases.demo.relsync.dev', `${NS}/${name}`, '--cluster', 'tenant-a', '--config', configPath, '-o', 'json']);
    const parsed = JSON.parse(out.stdout || '[]') as Array<{ relations: Array<{ rule: string; source: string; state: string; message: string }> }>;
    return parsed[0]?.relations.find((r) => r.rule === rule && r.source.endsWith(`/${source}`));
  }

  async function gone(name: string): Promise<void> {
    await a.deleteDatabase(NS, name);
    // The finalizer comes off only after every related copy was ended: deleted or released.
    await eventually(`${name} deleted`, async () => (await a.database(NS, name)) === undefined, 30_000);
  }

  it('MatchOrigin, origin service: a copy goes with its origin object, the others stay, and all go with the primary; the service side is never touched', async () => {
    const copy = await primary('m1');
    await svc.putConfigMap(copyNs, 'cred-1', { v: '1' }, { app: 'm1-match' }, copy);
    await svc.putConfigMap(copyNs, 'cred-2', { v: '2' }, { app: 'm1-match' }, copy);
    await eventually('both copied to the platform', async () => (await a.configMap(NS, 'cred-1')) && (await a.configMap(NS, 'cred-2')), 30_000);
    await svc.deleteConfigMap(copyNs, 'cred-1');
    await eventually('the copy of the deleted origin pruned', async () => (await a.configMap(NS, 'cred-1')) === undefined, 30_000);
    assert.equal((await a.configMap(NS, 'cred-2'))?.data?.v, '2', 'the other copy stays');
    await gone('m1');
    assert.equal(await a.configMap(NS, 'cred-2'), undefined, 'every copy goes with the primary');
    assert.equal((await svc.configMap(copyNs, 'cred-2'))?.data?.v, '2', 'the origin object in the service cluster is never touched');
  });

  it('MatchOrigin: a copy whose origin went just before the primary is reclaimed by the teardown', async () => {
    const copy = await primary('m2');
    await svc.putConfigMap(copyNs, 'cred-3', { v: '3' }, { app: 'm2-match' }, copy);
    await eventually('copied to the platform', () => a.configMap(NS, 'cred-3'), 30_000);
    await svc.deleteConfigMap(copyNs, 'cred-3');
    await gone('m2');
    assert.equal(await a.configMap(NS, 'cred-3'), undefined);
  });

  it('MatchOrigin, origin kcp: a source relabelled out of the selector has its service copy pruned, the source and the other copy stay', async () => {
    await a.putConfigMap(NS, 'set-1', { v: '1' }, { app: 'k1-settings' });
    await a.putConfigMap(NS, 'set-2', { v: '2' }, { app: 'k1-settings' });
    await primary('k1');
    await eventually('both copied to the service cluster', async () => (await svc.configMap(copyNs, 'set-1')) && (await svc.configMap(copyNs, 'set-2')), 30_000);
    await a.putConfigMap(NS, 'set-1', { v: '1' }, { app: 'elsewhere' });
    await eventually('the relabelled source\'s copy pruned', async () => (await svc.configMap(copyNs, 'set-1')) === undefined, 30_000);
    assert.equal((await svc.configMap(copyNs, 'set-2'))?.data?.v, '2');
    assert.equal((await a.configMap(NS, 'set-1'))?.data?.v, '1', 'the source itself is untouched');
  });

  it('OnPrimaryDeletion: copies outlive their origin (relabelled or deleted) while the primary lives, not updated, and go with it', async () => {
    const copy = await primary('d1');
    await svc.putSecret(copyNs, 'd-1', { p: '1' }, { app: 'd1-ondelete' }, copy);
    await svc.putSecret(copyNs, 'd-2', { p: '2' }, { app: 'd1-ondelete' }, copy);
    await eventually('both copied to the platform', async () => (await a.secret(NS, 'd-1')) && (await a.secret(NS, 'd-2')), 30_000);
    await svc.putSecret(copyNs, 'd-1', { p: 'changed' }, { app: 'elsewhere' });
    await svc.deleteSecret(copyNs, 'd-2');
    // Processed: the store says why each copy is still there.
    for (const source of ['d-1', 'd-2']) {
      const kept = await eventually(`${source} retained`, async () => {
        const r = await relation('d1', 'ondelete', source);
        return r?.state === 'retained' ? r : undefined;
      }, 30_000);
      assert.match(kept.message, /kept as it was until the primary is deleted \(cleanupPolicy OnPrimaryDeletion\)/);
    }
    assert.equal(decode(await a.secret(NS, 'd-1'), 'p'), '1', 'kept as it was: a source no longer found is not copied');
    assert.equal((await a.secret(NS, 'd-2'))?.metadata?.labels?.[AGENT_LABEL], 'e2e', 'still relsync\'s copy');
    await gone('d1');
    assert.equal(await a.secret(NS, 'd-1'), undefined);
    assert.equal(await a.secret(NS, 'd-2'), undefined);
    assert.equal(decode(await svc.secret(copyNs, 'd-1'), 'p'), 'changed', 'the service side is never touched');
  });

  it('Orphan (no policy): a copy outlives its origin and resumes when it returns; when the primary goes it is released to the tenant, and a new primary never takes it back silently', async () => {
    let copy = await primary('o1');
    await svc.putSecret(copyNs, 'o1-orphan', { p: '1' }, undefined, copy);
    await eventually('copied to the platform', async () => decode(await a.secret(NS, 'o1-orphan'), 'p') === '1', 30_000);
    await svc.deleteSecret(copyNs, 'o1-orphan');
    const waiting = await eventually('the relation keeps its copy, waiting for its origin', async () => {
      const r = await relation('o1', 'orphan', 'o1-orphan');
      return r?.state === 'retained' ? r : undefined;
    }, 30_000);
    assert.match(waiting.message, /waiting for .* to exist; its copy is kept as it was until the primary is deleted \(cleanupPolicy Orphan\)/);
    assert.equal(decode(await a.secret(NS, 'o1-orphan'), 'p'), '1', 'the copy outlives its origin');
    await svc.putSecret(copyNs, 'o1-orphan', { p: '2' }, undefined, copy);
    await eventually('the returning origin is copied again', async () => decode(await a.secret(NS, 'o1-orphan'), 'p') === '2', 30_000);

    await gone('o1');
    const released = await a.secret(NS, 'o1-orphan');
    assert.equal(decode(released, 'p'), '2', 'released, not deleted');
    const marks = [...Object.keys(released?.metadata?.labels ?? {}), ...Object.keys(released?.metadata?.annotations ?? {})].filter((k) => k.startsWith('relsync.dev/'));
    assert.deepEqual(marks, [], 'none of relsync\'s marks is left: the object is the tenant\'s');
    assert.equal(decode(await svc.secret(copyNs, 'o1-orphan'), 'p'), '2', 'the origin is never touched');

    // A primary of the same name, and the operator's Secret owned by its copy: the released object is in the way.
    copy = await primary('o1');
    await svc.putSecret(copyNs, 'o1-orphan', { p: '3' }, undefined, copy);
    const conflict = await eventually('a conflict, not an adoption', async () => {
      const r = await relation('o1', 'orphan', 'o1-orphan');
      return r?.state === 'conflict' ? r : undefined;
    }, 30_000);
    assert.match(conflict.message, /is not relsync's copy .* left untouched/);
    assert.equal(decode(await a.secret(NS, 'o1-orphan'), 'p'), '2', 'the tenant\'s object is left as it was');
    await gone('o1');
    assert.equal(decode(await a.secret(NS, 'o1-orphan'), 'p'), '2', 'and it outlives the new primary too');
  });

  it('a tenant that keeps pointing its reference elsewhere leaves at most limits.relatedPerPrimary relations behind; the copies beyond are released, not kept in the store', async () => {
    const copy = await primary('p1');
    for (let i = 1; i <= 6; i++) await svc.putSecret(copyNs, `p-${i}`, { n: String(i) }, undefined, copy);
    for (let i = 1; i <= 6; i++) {
      await a.updateDatabase(NS, 'p1', (db) => void (db.spec = { pick: `p-${i}` }));
      await eventually(`p-${i} copied`, async () => decode(await a.secret(NS, `p-${i}`), 'n') === String(i), 30_000);
    }
    // Processed: the store holds the last pick synced (the reconcile that saved it also ended what it left behind).
    const out = await runCli(['inspect', 'primary', 'databases.demo.relsync.dev', `${NS}/p1`, '--cluster', 'tenant-a', '--config', configPath, '-o', 'json']);
    const relations = (JSON.parse(out.stdout) as Array<{ relations: Array<{ rule: string; source: string; state: string }> }>)[0]!.relations;
    assert.ok(relations.length <= 4, `at most limits.relatedPerPrimary rows: ${JSON.stringify(relations)}`);
    assert.equal(relations.find((r) => r.source.endsWith('/p-6'))?.state, 'synced');
    const kept = relations.filter((r) => r.rule === 'pick' && r.state === 'retained');
    assert.equal(kept.length, 2, 'room for two kept copies beside the two relations found now (the template and the pick)');
    for (let i = 1; i <= 5; i++) {
      const s = await a.secret(NS, `p-${i}`);
      const marked = s?.metadata?.labels?.[AGENT_LABEL] === 'e2e';
      assert.equal(decode(s, 'n'), String(i), `p-${i} is never deleted (Orphan)`);
      assert.equal(marked, kept.some((r) => r.source.endsWith(`/p-${i}`)), `p-${i}: marked exactly when its relation is kept`);
    }
  });

  it('two rules of one type with different policies: each copy ends by its own rule\'s policy', async () => {
    const copy = await primary('x1');
    await svc.putSecret(copyNs, 'x1-orphan', { p: 'o' }, undefined, copy);
    await svc.putSecret(copyNs, 'x-d', { p: 'd' }, { app: 'x1-ondelete' }, copy);
    await eventually('both copied', async () => (await a.secret(NS, 'x1-orphan')) && (await a.secret(NS, 'x-d')), 30_000);
    await gone('x1');
    assert.equal(await a.secret(NS, 'x-d'), undefined, 'the OnPrimaryDeletion rule\'s copy is deleted');
    const kept = await a.secret(NS, 'x1-orphan');
    assert.equal(decode(kept, 'p'), 'o', 'the Orphan rule\'s copy of the same type stays');
    assert.equal(kept?.metadata?.labels?.[AGENT_LABEL], undefined);
  });

  it('refuses to start when an Orphan rule\'s copies are of a primary type, which a release would turn into new primaries', async () => {
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    const bad = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: join(dir, 'bad.db') },
      leaderElection: { enabled: false },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [{ id: 'replicas', origin: 'service', group: 'demo.relsync.dev', resource: 'databases', template: { name: '{{ name }}-replica' }, cleanupPolicy: 'Orphan' }] }],
    }, 'bad.yaml');
    const out = await runCli(['sweep', '--config', bad, '--log-level', 'error']);
    assert.equal(out.code, 2, out.stderr);
    assert.match(out.stderr, /resources\[0\]\.related\[0\]: cleanupPolicy Orphan leaves its copies to the tenant .* databases, the primary type of resources\[0\]/);
  });

  it('a sweep that finds copies nothing accounts for (the store lost, the primary deleted by hand meanwhile) releases an Orphan rule\'s and deletes a MatchOrigin rule\'s', async () => {
    const copy = await primary('l1');
    await svc.putSecret(copyNs, 'l1-orphan', { p: 'l' }, undefined, copy);
    await svc.putConfigMap(copyNs, 'l-m', { v: 'm' }, { app: 'l1-match' }, copy);
    await eventually('both copied', async () => (await a.secret(NS, 'l1-orphan')) && (await a.configMap(NS, 'l-m')), 30_000);
    await relsync.stop();
    await a.updateDatabase(NS, 'l1', (db) => void (db.metadata.finalizers = []));
    await a.deleteDatabase(NS, 'l1');
    for (const f of [dbPath, `${dbPath}-wal`, `${dbPath}-shm`]) rmSync(f, { force: true });
    relsync = await startRelsync(configPath, join(dir, 'relsync-2.log'));
    await eventually('the MatchOrigin copy deleted by the start-up sweep', async () => (await a.configMap(NS, 'l-m')) === undefined, 60_000);
    const released = await eventually('the Orphan copy released', async () => {
      const s = await a.secret(NS, 'l1-orphan');
      return s && s.metadata?.labels?.[AGENT_LABEL] === undefined ? s : undefined;
    }, 60_000);
    assert.equal(decode(released, 'p'), 'l');
    assert.ok(relsync.log().includes('sweep released a related copy'), 'the log says what the sweep did');
  });
});

// Core sync against real control planes: two platform clusters (tenants) and
// a service cluster, relsync started as a real process from the built CLI.
// Each test works in its own namespace so that they do not disturb each other.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../harness/kube.js';
import { startTenants, type RelsyncFixture } from '../harness/relsync-fixture.js';
import { runCli, writeConfig } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

describe('core sync', () => {
  let t: RelsyncFixture<'tenant-a' | 'tenant-b'>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;

  before(async () => {
    t = await startTenants('core', ['tenant-a', 'tenant-b'], {
      resources: [
        {
          group: 'demo.relsync.dev',
          version: 'v1alpha1',
          resource: 'databases',
          related: [
            { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
            { id: 'tls', origin: 'platform', resource: 'secrets', reference: { path: '.spec.tlsSecrets[*]', rewrite: { regex: { pattern: '^(.*)$', replacement: '$1-copy' } } } },
            { id: 'settings', origin: 'platform', resource: 'configmaps', template: { name: '{{ name }}-settings' } },
            { id: 'credentials', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-credentials' } },
            { id: 'endpoint', origin: 'service', kind: 'ConfigMap', reference: { path: '.status.endpointConfigMap' } },
          ],
        },
      ],
    });
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = t.clusters.client);
  });

  after(() => t?.stop());

  it('copies a primary, keeps it updated, copies status back, and cleans up on delete', async () => {
    await a.ensureNamespace('t1');
    await a.createDatabase('t1', 'orders', { size: 'small' }, { team: 'shop' });
    const ns = defaultCopyNamespace('tenant-a', 't1');
    const copy = await eventually('copy of t1/orders in the service cluster', () => svc.database(ns, 'orders'));
    assert.deepEqual(copy.spec, { size: 'small' });
    assert.equal(copy.metadata.labels?.team, 'shop');
    assert.equal(copy.metadata.labels?.['relsync.dev/agent'], 'e2e');
    assert.equal(copy.metadata.annotations?.['relsync.dev/source-cluster'], 'tenant-a');
    assert.equal(copy.metadata.annotations?.['relsync.dev/source-name'], 'orders');
    const primary = await a.database('t1', 'orders');
    assert.ok(primary?.metadata.finalizers?.includes('relsync.dev/e2e'), 'the primary carries the finalizer');

    await a.updateDatabase('t1', 'orders', (db) => (db.spec = { size: 'large' }));
    await eventually('spec change reaches the copy', async () => (await svc.database(ns, 'orders'))?.spec?.size === 'large');

    // a label the user takes away goes from the copy too; one the operator put on the copy stays
    await svc.updateDatabase(ns, 'orders', (db) => (db.metadata.labels = { ...db.metadata.labels, 'operator.example/managed': 'yes' }));
    await a.updateDatabase('t1', 'orders', (db) => (db.metadata.labels = { tier: 'gold' }));
    const relabelled = await eventually('label change reaches the copy', async () => {
      const c = await svc.database(ns, 'orders');
      return c?.metadata.labels?.tier === 'gold' && c.metadata.labels.team === undefined ? c : undefined;
    });
    assert.equal(relabelled.metadata.labels?.['operator.example/managed'], 'yes', 'the operator’s own label stays');

    await svc.updateDatabase(ns, 'orders', (db) => (db.status = { phase: 'Ready' }), 'status');
    await eventually('status flows back to the primary', async () => (await a.database('t1', 'orders'))?.status?.phase === 'Ready');

    await a.deleteDatabase('t1', 'orders');
    await eventually('copy deleted', async () => (await svc.database(ns, 'orders')) === undefined);
    await eventually('primary released by its finalizer', async () => (await a.database('t1', 'orders')) === undefined);
  });

  it('syncs related objects by reference and template in both origins, and follows later changes', async () => {
    await a.ensureNamespace('t2');
    await a.putConfigMap('t2', 'orders-config', { mode: 'fast' });
    await a.putSecret('t2', 'tls-a', { key: 'aaa' });
    await a.putSecret('t2', 'tls-b', { key: 'bbb' });
    await a.putConfigMap('t2', 'orders-settings', { retention: '7d' });
    await a.createDatabase('t2', 'orders', { configMapName: 'orders-config', tlsSecrets: ['tls-a', 'tls-b'] });
    const ns = defaultCopyNamespace('tenant-a', 't2');

    const cfg = await eventually('referenced ConfigMap copied', () => svc.configMap(ns, 'orders-config'));
    assert.deepEqual(cfg.data, { mode: 'fast' });
    assert.equal(cfg.metadata?.labels?.['relsync.dev/agent'], 'e2e');
    assert.equal(decode(await eventually('tls-a copied and renamed', () => svc.secret(ns, 'tls-a-copy')), 'key'), 'aaa');
    assert.equal(decode(await eventually('tls-b copied and renamed', () => svc.secret(ns, 'tls-b-copy')), 'key'), 'bbb');
    assert.deepEqual((await eventually('template ConfigMap copied', () => svc.configMap(ns, 'orders-settings'))).data, { retention: '7d' });

    // service origin: the operator creates credentials and an endpoint ConfigMap it names in the copy's status
    const ordersCopy = await svc.copyOf(ns, 'orders');
    await svc.putSecret(ns, 'orders-credentials', { password: 's3cret' }, undefined, ordersCopy);
    await svc.putConfigMap(ns, 'orders-endpoint', { host: 'db.internal' }, undefined, ordersCopy);
    await svc.updateDatabase(ns, 'orders', (db) => (db.status = { endpointConfigMap: 'orders-endpoint' }), 'status');
    assert.equal(decode(await eventually('service-origin Secret reaches the platform', () => a.secret('t2', 'orders-credentials')), 'password'), 's3cret');
    assert.deepEqual((await eventually('service-origin reference reaches the platform', () => a.configMap('t2', 'orders-endpoint'))).data, { host: 'db.internal' });

    // later changes of related objects alone, without touching the primary
    await a.putConfigMap('t2', 'orders-config', { mode: 'safe' }, { stage: 'beta' });
    await eventually('platform-side change reaches the copy', async () => (await svc.configMap(ns, 'orders-config'))?.data?.mode === 'safe');
    await eventually('a label added to the source reaches the copy', async () => (await svc.configMap(ns, 'orders-config'))?.metadata?.labels?.stage === 'beta');
    await a.putConfigMap('t2', 'orders-config', { mode: 'safe' }, {});
    await eventually('a label taken from the source goes from the copy', async () => (await svc.configMap(ns, 'orders-config'))?.metadata?.labels?.stage === undefined);
    await svc.putSecret(ns, 'orders-credentials', { password: 'rotated' });
    await eventually('service-side change reaches the platform', async () => decode(await a.secret('t2', 'orders-credentials'), 'password') === 'rotated');

    // a related source deleted: its copy goes
    await a.deleteSecret('t2', 'tls-b');
    await eventually('copy of a deleted source removed', async () => (await svc.secret(ns, 'tls-b-copy')) === undefined);
    assert.ok(await svc.secret(ns, 'tls-a-copy'), 'the other referenced Secret stays');

    // the reference moves to another object
    await a.putConfigMap('t2', 'orders-config-v2', { mode: 'v2' });
    await a.updateDatabase('t2', 'orders', (db) => (db.spec = { ...db.spec, configMapName: 'orders-config-v2' }));
    await eventually('new referenced object copied', async () => (await svc.configMap(ns, 'orders-config-v2'))?.data?.mode === 'v2');
    await eventually('old referenced copy removed', async () => (await svc.configMap(ns, 'orders-config')) === undefined);

    // drift: copies edited or deleted by hand are repaired
    await svc.putConfigMap(ns, 'orders-config-v2', { mode: 'tampered' });
    await eventually('edited related copy repaired', async () => (await svc.configMap(ns, 'orders-config-v2'))?.data?.mode === 'v2');
    await svc.deleteConfigMap(ns, 'orders-settings');
    await eventually('deleted related copy recreated', async () => (await svc.configMap(ns, 'orders-settings'))?.data?.retention === '7d');
    await svc.updateDatabase(ns, 'orders', (db) => (db.spec = { ...db.spec, configMapName: 'tampered' }));
    await eventually('edited primary copy repaired', async () => (await svc.database(ns, 'orders'))?.spec?.configMapName === 'orders-config-v2');
    await svc.deleteDatabase(ns, 'orders');
    await eventually('deleted primary copy recreated', async () => (await svc.database(ns, 'orders'))?.spec?.configMapName === 'orders-config-v2');
  });

  it('syncs a referenced object that is created after the primary', async () => {
    await a.ensureNamespace('t3');
    await a.createDatabase('t3', 'late', { configMapName: 'late-config' });
    const ns = defaultCopyNamespace('tenant-a', 't3');
    await eventually('copy of the primary', () => svc.database(ns, 'late'));
    const pending = await eventually('pending relation in the store', async () => {
      const out = await runCli(['inspect', 'primary', 'databases.demo.relsync.dev', 't3/late', '--cluster', 'tenant-a', '--config', t.configPath, '-o', 'json']);
      const parsed = JSON.parse(out.stdout || '[]') as Array<{ relations: Array<{ rule: string; state: string }> }>;
      return parsed[0]?.relations.find((r) => r.rule === 'config' && r.state === 'pending');
    });
    assert.ok(pending);
    await a.putConfigMap('t3', 'late-config', { ready: 'yes' });
    await eventually('late object copied', async () => (await svc.configMap(ns, 'late-config'))?.data?.ready === 'yes');
  });

  it('keeps one copy of an object shared by two primaries until the last one lets go', async () => {
    await a.ensureNamespace('t4');
    await a.putConfigMap('t4', 'shared', { v: '1' });
    await a.createDatabase('t4', 'one', { configMapName: 'shared' });
    await a.createDatabase('t4', 'two', { configMapName: 'shared' });
    const ns = defaultCopyNamespace('tenant-a', 't4');
    await eventually('shared object copied', () => svc.configMap(ns, 'shared'));
    const owners = await runCli(['inspect', 'owners', 'configmaps', 't4/shared', '--cluster', 'tenant-a', '--config', t.configPath, '-o', 'json']);
    const parsed = JSON.parse(owners.stdout) as Array<{ primary: string }>;
    assert.deepEqual(parsed.map((o) => o.primary).sort(), ['tenant-a:databases.demo.relsync.dev:t4/one', 'tenant-a:databases.demo.relsync.dev:t4/two']);

    await a.deleteDatabase('t4', 'one');
    await eventually('first owner gone', async () => (await a.database('t4', 'one')) === undefined && (await svc.database(ns, 'one')) === undefined);
    assert.ok(await svc.configMap(ns, 'shared'), 'the copy stays while another primary owns it');
    await a.putConfigMap('t4', 'shared', { v: '2' });
    await eventually('the remaining owner still syncs it', async () => (await svc.configMap(ns, 'shared'))?.data?.v === '2');

    await a.deleteDatabase('t4', 'two');
    await eventually('copy removed with its last owner', async () => (await svc.configMap(ns, 'shared')) === undefined);
  });

  it('keeps two tenants with identical names apart', async () => {
    await a.ensureNamespace('same');
    await b.ensureNamespace('same');
    await a.putConfigMap('same', 'cfg', { tenant: 'a' });
    await b.putConfigMap('same', 'cfg', { tenant: 'b' });
    await a.createDatabase('same', 'orders', { configMapName: 'cfg', size: 'a' });
    await b.createDatabase('same', 'orders', { configMapName: 'cfg', size: 'b' });
    const nsA = defaultCopyNamespace('tenant-a', 'same');
    const nsB = defaultCopyNamespace('tenant-b', 'same');
    assert.notEqual(nsA, nsB);
    await eventually('tenant a copy', async () => (await svc.database(nsA, 'orders'))?.spec?.size === 'a');
    await eventually('tenant b copy', async () => (await svc.database(nsB, 'orders'))?.spec?.size === 'b');
    await eventually('tenant a related copy', async () => (await svc.configMap(nsA, 'cfg'))?.data?.tenant === 'a');
    await eventually('tenant b related copy', async () => (await svc.configMap(nsB, 'cfg'))?.data?.tenant === 'b');
    // service-origin objects go back only to their own tenant
    await svc.putSecret(nsB, 'orders-credentials', { password: 'only-b' }, undefined, await svc.copyOf(nsB, 'orders'));
    await eventually('tenant b gets its credentials', async () => decode(await b.secret('same', 'orders-credentials'), 'password') === 'only-b');
    assert.equal(await a.secret('same', 'orders-credentials'), undefined, 'tenant a never sees tenant b\'s credentials');
  });

  it('never overwrites an object in the service cluster that it did not create', async () => {
    const ns = defaultCopyNamespace('tenant-a', 't6');
    await svc.ensureNamespace(ns, { cluster: 'tenant-a', namespace: 't6' });
    await svc.createDatabase(ns, 'squatter', { owner: 'someone-else' });
    await svc.putConfigMap(ns, 'squat-config', { owner: 'someone-else' });
    await a.ensureNamespace('t6');
    await a.putConfigMap('t6', 'squat-config', { owner: 'relsync' });
    await a.createDatabase('t6', 'squatter', { owner: 'tenant', configMapName: 'squat-config' });
    await eventually('conflict Event on the primary', async () => (await a.events('t6', 'squatter')).some((e) => e.reason === 'CopyConflict'));
    assert.deepEqual((await svc.database(ns, 'squatter'))?.spec, { owner: 'someone-else' });
    assert.deepEqual((await svc.configMap(ns, 'squat-config'))?.data, { owner: 'someone-else' });
    await t.relsync.waitForLog('the conflict', /CopyConflict|not created by relsync/);
  });

  it('tells the primary’s owner about a related copy it may not overwrite, and syncs it once the way is clear', async () => {
    const ns = defaultCopyNamespace('tenant-a', 't6b');
    await svc.ensureNamespace(ns, { cluster: 'tenant-a', namespace: 't6b' });
    await svc.putConfigMap(ns, 'taken-config', { owner: 'someone-else' });
    await a.ensureNamespace('t6b');
    await a.putConfigMap('t6b', 'taken-config', { owner: 'tenant' });
    await a.createDatabase('t6b', 'blocked', { configMapName: 'taken-config' });
    await eventually('the primary itself is copied', () => svc.database(ns, 'blocked'));
    const event = await eventually('RelatedCopyConflict Event on the primary', async () => (await a.events('t6b', 'blocked')).find((e) => e.reason === 'RelatedCopyConflict'));
    // The tenant hears that the name is taken, not by what: the provider's object is no business of theirs (issue #36).
    assert.match(event.message ?? '', /rule config: the copy of .*taken-config is not written: .*taken-config is taken or closed to this primary/);
    assert.deepEqual((await svc.configMap(ns, 'taken-config'))?.data, { owner: 'someone-else' }, 'left untouched');
    const metrics = await (await fetch(`http://127.0.0.1:${t.relsync.httpPort}/metrics`)).text();
    assert.match(metrics, /relsync_conflicts_total\{kind="related"\} [1-9]/);
    // The squatter goes: its deletion reaches the primary through the stored destination, well before the 30 s conflict retry.
    const cleared = Date.now();
    await svc.deleteConfigMap(ns, 'taken-config');
    await eventually('the copy is written once the way is clear', async () => (await svc.configMap(ns, 'taken-config'))?.data?.owner === 'tenant', 15_000);
    assert.ok(Date.now() - cleared < 15_000);
  });

  it('tells the primary’s owner when the service cluster refuses its copy, and syncs it once the primary is fixed', async () => {
    // A real admission denial in the service cluster: a ValidatingAdmissionPolicy on Databases.
    const policy = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', metadata: { name: 'no-huge-databases' },
      spec: { failurePolicy: 'Fail', matchConstraints: { resourceRules: [{ apiGroups: ['demo.relsync.dev'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['databases'] }] },
        validations: [{ expression: "!has(object.spec.size) || object.spec.size != 'huge'", message: 'size huge is not offered by this provider' }] } };
    const binding = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', metadata: { name: 'no-huge-databases' }, spec: { policyName: 'no-huge-databases', validationActions: ['Deny'] } };
    for (const body of [policy, binding]) {
      await svc.objects.createClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural: body.kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings', body });
    }
    const ns = defaultCopyNamespace('tenant-a', 't6c');
    await svc.ensureNamespace(ns, { cluster: 'tenant-a', namespace: 't6c' });
    await eventually('the policy is in force', async () => {
      try {
        await svc.createDatabase(ns, 'probe', { size: 'huge' });
        await svc.deleteDatabase(ns, 'probe');
        return false;
      } catch {
        return true;
      }
    });
    await a.ensureNamespace('t6c');
    await a.createDatabase('t6c', 'too-big', { size: 'huge' });
    const event = await eventually('CopySyncFailed Event on the primary', async () => (await a.events('t6c', 'too-big')).find((e) => e.reason === 'CopySyncFailed'));
    assert.match(event.message ?? '', /cannot write the copy .*too-big.*size huge is not offered by this provider/);
    assert.equal(await svc.database(ns, 'too-big'), undefined);
    await a.updateDatabase('t6c', 'too-big', (db) => {
      db.spec = { size: 'small' };
    });
    await eventually('the fixed primary is copied', async () => (await svc.database(ns, 'too-big'))?.spec?.size === 'small', 30_000);
  });

  it('cleans up at the next start a primary deleted while relsync was stopped, and catches up on changes', async () => {
    await a.ensureNamespace('t7');
    await a.putConfigMap('t7', 'gone-config', { v: '1' });
    await a.putConfigMap('t7', 'kept-config', { v: '1' });
    await a.createDatabase('t7', 'gone', { configMapName: 'gone-config' });
    await a.createDatabase('t7', 'kept', { configMapName: 'kept-config' });
    const ns = defaultCopyNamespace('tenant-a', 't7');
    await eventually('copies exist', async () => (await svc.configMap(ns, 'gone-config')) !== undefined && (await svc.configMap(ns, 'kept-config')) !== undefined);

    assert.equal(await t.relsync.stop(), 0, 'relsync exits cleanly on SIGTERM');
    // Vanish without relsync seeing it: drop the finalizer by hand, then delete.
    await a.updateDatabase('t7', 'gone', (db) => (db.metadata.finalizers = []));
    await a.deleteDatabase('t7', 'gone');
    await a.putConfigMap('t7', 'kept-config', { v: '2' });
    await t.restart();

    await eventually('copy of the vanished primary removed', async () => (await svc.database(ns, 'gone')) === undefined, 15_000);
    await eventually('its related copy removed', async () => (await svc.configMap(ns, 'gone-config')) === undefined);
    await eventually('a change made while stopped is synced', async () => (await svc.configMap(ns, 'kept-config'))?.data?.v === '2');
    const inspect = await runCli(['inspect', 'primary', 'databases.demo.relsync.dev', 't7/gone', '--config', t.configPath, '-o', 'json']);
    assert.deepEqual(JSON.parse(inspect.stdout), [], 'the store forgot the vanished primary');
  });

  it('never writes a Secret value to its logs, metrics, Events or store', async () => {
    // Values synced by the tests above (both origins), in clear and base64.
    const values = ['s3cret', 'rotated', 'only-b'];
    const forms = values.flatMap((v) => [v, Buffer.from(v).toString('base64').replace(/=+$/, '')]);
    const logs = readdirSync(t.dir).filter((f) => f.endsWith('.log')).map((f) => readFileSync(join(t.dir, f), 'utf8')).join('\n');
    assert.ok(logs.length > 1000 && /"level":"debug"/.test(logs), 'debug logs were captured');
    // A reconcile's lines carry its id (util/log-context.ts); a watch event's, routed outside any reconcile, none.
    const lines = logs.split('\n').flatMap((l) => {
      try {
        return [JSON.parse(l) as { reconcile?: string; msg?: string }];
      } catch {
        return [];
      }
    });
    assert.ok(lines.some((l) => typeof l.reconcile === 'string' && /^[0-9a-f]{16}$/.test(l.reconcile)), 'lines of reconciles carry their id');
    assert.ok(lines.filter((l) => l.msg === 'routed event').every((l) => l.reconcile === undefined), 'a routed event is no reconcile\'s');
    const store = readdirSync(t.dir).filter((f) => f.startsWith('relsync.db')).map((f) => readFileSync(join(t.dir, f)).toString('latin1')).join('');
    const metrics = await (await fetch(`http://127.0.0.1:${t.relsync.httpPort}/metrics`)).text();
    const events = JSON.stringify([...(await a.core.listEventForAllNamespaces()).items, ...(await b.core.listEventForAllNamespaces()).items]);
    for (const [where, text] of [['logs', logs], ['store', store], ['metrics', metrics], ['events', events]] as const) {
      for (const form of forms) assert.ok(!text.includes(form), `${where} contain a Secret value (${form})`);
    }
    assert.equal(statSync(join(t.dir, 'relsync.db')).mode & 0o777, 0o600, 'the store file is readable by its owner only');
  });

  it('rejects a broken config with the exact path of each problem', async () => {
    const broken = writeConfig(t.dir, {
      platformClusters: [{ name: 'Tenant_A', kubeconfig: join(t.dir, 'missing.kubeconfig') }],
      resources: [
        {
          group: 'demo.relsync.dev',
          resource: 'databases',
          related: [
            { id: 'ok', origin: 'platform', resource: 'configmaps', template: { name: '{{ name }}' } },
            { id: 'bad', origin: 'platform', resource: 'secrets', reference: { path: '.spec..name' } },
            { id: 'bad', origin: 'sideways', resource: 'secrets', template: { name: '{{ nme }}' } },
          ],
        },
      ],
    }, 'broken.yaml');
    const out = await runCli(['validate', '--config', broken]);
    assert.equal(out.code, 2);
    assert.match(out.stderr, /platformClusters\[0\]\.name: must be a lowercase DNS label/);
    assert.match(out.stderr, /resources\[0\]\.related\[2\]\.origin/);
    assert.match(out.stderr, /resources\[0\]\.related\[2\]\.id: duplicate rule id "bad"/);

    const fixable = writeConfig(t.dir, {
      platformClusters: [{ name: 'tenant-a', kubeconfig: join(t.dir, 'missing.kubeconfig') }],
      resources: [
        {
          group: 'demo.relsync.dev',
          resource: 'databases',
          related: [
            { id: 'ok', origin: 'platform', resource: 'configmaps', template: { name: '{{ name }}' } },
            { id: 'bad', origin: 'platform', resource: 'secrets', reference: { path: '.spec..name' } },
            { id: 'tmpl', origin: 'platform', resource: 'secrets', template: { name: '{{ nme }}' } },
          ],
        },
      ],
    }, 'fixable.yaml');
    const second = await runCli(['validate', '--config', fixable]);
    assert.equal(second.code, 2);
    assert.match(second.stderr, /platformClusters\[0\]\.kubeconfig: file .*missing\.kubeconfig does not exist/);
    assert.match(second.stderr, /resources\[0\]\.related\[1\]\.reference\.path: invalid path/);
    assert.match(second.stderr, /resources\[0\]\.related\[2\]\.template\.name: .*unknown variable "nme"/);

    const run = await runCli(['run', '--config', fixable, '--no-http']);
    assert.equal(run.code, 2, 'run refuses a broken config with exit code 2');
  });
});

// Label-selector and inverse related rules against real control planes: two
// tenants and a service cluster, relsync as a real process.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../harness/kube.js';
import { startTenants, type RelsyncFixture } from '../harness/relsync-fixture.js';
import { runCli } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, ownerReference, type ClusterClient } from '../harness/tenant.js';

const OWNER = 'inverse.relsync.dev/owner';

describe('selector and inverse rules', () => {
  let t: RelsyncFixture<'tenant-a' | 'tenant-b'>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;

  before(async () => {
    t = await startTenants('selector', ['tenant-a', 'tenant-b'], {
      resources: [
        {
          group: 'demo.relsync.dev',
          resource: 'databases',
          related: [
            { id: 'sel-app', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
            {
              id: 'sel-tier',
              origin: 'platform',
              resource: 'secrets',
              selector: {
                matchExpressions: [
                  { key: 'tier', operator: 'In', values: ['{{ object.spec.tier }}'] },
                  { key: 'legacy', operator: 'DoesNotExist' },
                ],
                rewrite: { template: '{{ name }}-{{ value }}' },
              },
            },
            { id: 'sel-team', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { team: '{{ object.spec.team }}' } } },
            { id: 'inv-label-p', origin: 'platform', resource: 'configmaps', inverse: { label: OWNER } },
            { id: 'inv-label-s', origin: 'service', resource: 'configmaps', inverse: { label: OWNER } },
            { id: 'inv-ann-p', origin: 'platform', resource: 'secrets', inverse: { annotation: OWNER } },
            { id: 'inv-ann-s', origin: 'service', resource: 'secrets', inverse: { annotation: OWNER } },
            { id: 'inv-ref-p', origin: 'platform', resource: 'serviceaccounts', inverse: { ownerReference: true } },
            { id: 'inv-ref-s', origin: 'service', resource: 'serviceaccounts', inverse: { ownerReference: true } },
            { id: 'inv-name-p', origin: 'platform', resource: 'secrets', inverse: { namePattern: '^(?<name>[a-z0-9-]+)\\.creds$' } },
            { id: 'inv-name-s', origin: 'service', resource: 'configmaps', inverse: { namePattern: '^(?<name>[a-z0-9-]+)\\.endpoint$' } },
          ],
        },
      ],
    });
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = t.clusters.client);
  });

  after(() => t?.stop());

  it('copies selector matches as they appear, and prunes an object that loses its label', async () => {
    await a.ensureNamespace('s1');
    await a.createDatabase('s1', 'orders', { tier: 'gold' });
    const ns = defaultCopyNamespace('tenant-a', 's1');
    await eventually('primary copied', () => svc.database(ns, 'orders'));

    await a.putConfigMap('s1', 'first', { n: '1' }, { app: 'orders' });
    assert.deepEqual((await eventually('a match created after the primary is copied', () => svc.configMap(ns, 'first'))).data, { n: '1' });
    await a.putConfigMap('s1', 'second', { n: '2' }, { app: 'orders' });
    await eventually('a second match is copied', () => svc.configMap(ns, 'second'));
    await a.putConfigMap('s1', 'first', { n: '1b' });
    await eventually('a match\'s data change is copied', async () => (await svc.configMap(ns, 'first'))?.data?.n === '1b');

    const first = await a.configMap('s1', 'first');
    await a.core.replaceNamespacedConfigMap({ namespace: 's1', name: 'first', body: { ...first!, metadata: { ...first!.metadata, labels: { app: 'other' } } } });
    await eventually('the copy of an object that lost its label is removed', async () => (await svc.configMap(ns, 'first')) === undefined);
    assert.ok(await svc.configMap(ns, 'second'), 'the other match stays');
  });

  it('evaluates matchExpressions with templated values and rewrites names', async () => {
    await a.ensureNamespace('s2');
    await a.createDatabase('s2', 'orders', { tier: 'gold' });
    const ns = defaultCopyNamespace('tenant-a', 's2');
    await a.putSecret('s2', 'gold-key', { k: 'g' });
    await a.putSecret('s2', 'silver-key', { k: 's' });
    await a.putSecret('s2', 'old-gold-key', { k: 'o' });
    for (const [name, labels] of [['gold-key', { tier: 'gold' }], ['silver-key', { tier: 'silver' }], ['old-gold-key', { tier: 'gold', legacy: 'true' }]] as const) {
      const s = await a.secret('s2', name);
      await a.core.replaceNamespacedSecret({ namespace: 's2', name, body: { ...s!, metadata: { ...s!.metadata, labels } } });
    }
    assert.equal(decode(await eventually('In match copied under its rewritten name', () => svc.secret(ns, 'orders-gold-key')), 'k'), 'g');
    // Markers: the match changed twice, each change copied. On the same watch after the relabels
    // (so they were routed), and each a reconcile of the same primary after the one before (so every
    // reconcile that could have copied a non-match has finished).
    for (const k of ['g2', 'g3']) {
      await a.putSecret('s2', 'gold-key', { k });
      await eventually(`marker ${k} copied`, async () => decode(await svc.secret(ns, 'orders-gold-key'), 'k') === k);
    }
    assert.equal(await svc.secret(ns, 'orders-silver-key'), undefined, 'a value outside In is not copied');
    assert.equal(await svc.secret(ns, 'orders-old-gold-key'), undefined, 'DoesNotExist excludes the legacy object');

    // the templated value follows the primary
    await a.updateDatabase('s2', 'orders', (db) => (db.spec = { tier: 'silver' }));
    await eventually('new tier matched', () => svc.secret(ns, 'orders-silver-key'));
    await eventually('old tier pruned', async () => (await svc.secret(ns, 'orders-gold-key')) === undefined);

    const inspect = await runCli(['inspect', 'primary', 'databases.demo.relsync.dev', 's2/orders', '--cluster', 'tenant-a', '--config', t.configPath, '-o', 'json']);
    const [parsed] = JSON.parse(inspect.stdout) as Array<{ selectors: Array<{ rule: string; selector: string }>; relations: Array<{ rule: string }> }>;
    assert.deepEqual(parsed!.selectors.find((s) => s.rule === 'sel-tier')?.selector, 'tier=silver,!legacy');
    assert.ok(parsed!.relations.some((r) => r.rule === 'sel-tier'), 'inspect shows selector relations');
  });

  it('copies an object matched by two primaries once and keeps it until both are gone', async () => {
    await a.ensureNamespace('s3');
    await a.createDatabase('s3', 'one', { team: 'blue' });
    await a.createDatabase('s3', 'two', { team: 'blue' });
    const ns = defaultCopyNamespace('tenant-a', 's3');
    await a.putConfigMap('s3', 'common', { v: '1' }, { team: 'blue' });
    await eventually('copied once', () => svc.configMap(ns, 'common'));
    const owners = await runCli(['inspect', 'owners', 'configmaps', 's3/common', '--cluster', 'tenant-a', '--config', t.configPath, '-o', 'json']);
    assert.deepEqual((JSON.parse(owners.stdout) as Array<{ primary: string; rule: string }>).map((o) => `${o.primary} ${o.rule}`).sort(), [
      'tenant-a:databases.demo.relsync.dev:s3/one sel-team',
      'tenant-a:databases.demo.relsync.dev:s3/two sel-team',
    ]);

    await a.deleteDatabase('s3', 'one');
    await eventually('first owner gone', async () => (await svc.database(ns, 'one')) === undefined && (await a.database('s3', 'one')) === undefined);
    await a.putConfigMap('s3', 'common', { v: '2' }, { team: 'blue' });
    await eventually('the copy stays and follows changes for the remaining owner', async () => (await svc.configMap(ns, 'common'))?.data?.v === '2');
    await a.deleteDatabase('s3', 'two');
    await eventually('copy removed with its last owner', async () => (await svc.configMap(ns, 'common')) === undefined);
  });

  it('finds objects that name their owner: label, annotation, ownerReference and name pattern, in both origins', async () => {
    await a.ensureNamespace('i1');
    const primary = await a.createDatabase('i1', 'orders', {});
    const ns = defaultCopyNamespace('tenant-a', 'i1');
    const copy = await eventually('primary copied', () => svc.database(ns, 'orders'));

    // platform origin
    await a.putConfigMap('i1', 'by-label', { v: 'l' }, { [OWNER]: 'orders' });
    await a.core.createNamespacedSecret({ namespace: 'i1', body: { metadata: { name: 'by-annotation', annotations: { [OWNER]: 'orders' } }, stringData: { v: 'a' } } });
    await a.core.createNamespacedServiceAccount({
      namespace: 'i1',
      body: { metadata: { name: 'by-ownerref', ownerReferences: [{ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', name: 'orders', uid: primary.metadata.uid! }] } },
    });
    await a.core.createNamespacedServiceAccount({
      namespace: 'i1',
      body: { metadata: { name: 'wrong-uid', ownerReferences: [{ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', name: 'orders', uid: '00000000-0000-0000-0000-000000000000' }] } },
    });
    await a.putSecret('i1', 'orders.creds', { v: 'n' });
    await eventually('inverse by label', () => svc.configMap(ns, 'by-label'));
    await eventually('inverse by annotation', () => svc.secret(ns, 'by-annotation'));
    await eventually('inverse by ownerReference', async () => (await svc.core.readNamespacedServiceAccount({ namespace: ns, name: 'by-ownerref' }).catch(() => undefined)) !== undefined);
    await eventually('inverse by name pattern', () => svc.secret(ns, 'orders.creds'));
    await assert.rejects(svc.core.readNamespacedServiceAccount({ namespace: ns, name: 'wrong-uid' }), 'an ownerReference with another uid is not this primary\'s');

    // service origin: objects next to the copy name the copy
    // (each also owned by the copy, as the operator that made it sets: a rule's default provenance)
    await svc.putConfigMap(ns, 'svc-by-label', { v: 'sl' }, { [OWNER]: 'orders' }, copy);
    await svc.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'svc-by-annotation', annotations: { [OWNER]: 'orders' }, ownerReferences: [ownerReference(copy)] }, stringData: { v: 'sa' } } });
    await svc.core.createNamespacedServiceAccount({
      namespace: ns,
      body: { metadata: { name: 'svc-by-ownerref', ownerReferences: [{ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', name: 'orders', uid: copy.metadata.uid! }] } },
    });
    await svc.putConfigMap(ns, 'orders.endpoint', { host: 'db' }, undefined, copy);
    await eventually('service inverse by label', () => a.configMap('i1', 'svc-by-label'));
    assert.equal(decode(await eventually('service inverse by annotation', () => a.secret('i1', 'svc-by-annotation')), 'v'), 'sa');
    await eventually('service inverse by ownerReference', async () => (await a.core.readNamespacedServiceAccount({ namespace: 'i1', name: 'svc-by-ownerref' }).catch(() => undefined)) !== undefined);
    await eventually('service inverse by name pattern', () => a.configMap('i1', 'orders.endpoint'));

    // an inverse object that stops naming its owner is pruned
    await a.putConfigMap('i1', 'by-label', { v: 'l' }, undefined);
    const cm = await a.configMap('i1', 'by-label');
    await a.core.replaceNamespacedConfigMap({ namespace: 'i1', name: 'by-label', body: { ...cm!, metadata: { ...cm!.metadata, labels: {} } } });
    await eventually('copy of an object that no longer names its owner removed', async () => (await svc.configMap(ns, 'by-label')) === undefined);
  });

  it('syncs an inverse object naming a primary that does not exist yet once the primary is created', async () => {
    await a.ensureNamespace('i2');
    await a.putConfigMap('i2', 'early', { v: 'e' }, { [OWNER]: 'future' });
    // The early object's event is handled (routed to nobody: its primary does not exist) before the primary is created.
    await eventually('the early object routed', async () => t.relsync.log().includes('"object":"i2/early","change":"ADDED","enqueued":0'));
    await a.createDatabase('i2', 'future', {});
    const ns = defaultCopyNamespace('tenant-a', 'i2');
    await eventually('the early object is copied when its primary appears', () => svc.configMap(ns, 'early'));
  });

  it('never lets a selector or inverse rule cross tenants', async () => {
    await a.ensureNamespace('iso');
    await b.ensureNamespace('iso');
    await a.createDatabase('iso', 'orders', { tier: 'gold' });
    const nsA = defaultCopyNamespace('tenant-a', 'iso');
    await eventually('tenant a primary copied', () => svc.database(nsA, 'orders'));
    // tenant b's objects name tenant a's primary by every means
    await b.putConfigMap('iso', 'b-selected', { t: 'b' }, { app: 'orders' });
    await b.putConfigMap('iso', 'b-inverse', { t: 'b' }, { [OWNER]: 'orders' });
    await b.putSecret('iso', 'orders.creds', { t: 'b' });
    // a marker in tenant a proves relsync processed events after tenant b's
    await a.putConfigMap('iso', 'a-selected', { t: 'a' }, { app: 'orders' });
    await eventually('tenant a match copied', () => svc.configMap(nsA, 'a-selected'));
    // tenant b's events were routed, to nobody
    for (const [type, object] of [['configmaps', 'iso/b-selected'], ['configmaps', 'iso/b-inverse'], ['secrets', 'iso/orders.creds']] as const) {
      await eventually(`tenant b's ${object} routed`, async () => t.relsync.log().includes(`"cluster":"tenant-b","type":"${type}","object":"${object}","change":"ADDED","enqueued":0`));
    }
    // and every reconcile of tenant a's primary started before now has finished: two changes, each copied after the one before
    for (const t of ['a2', 'a3']) {
      await a.putConfigMap('iso', 'a-selected', { t });
      await eventually(`marker ${t} copied`, async () => (await svc.configMap(nsA, 'a-selected'))?.data?.t === t);
    }
    assert.equal(await svc.configMap(nsA, 'b-selected'), undefined);
    assert.equal(await svc.configMap(nsA, 'b-inverse'), undefined);
    assert.equal(await svc.secret(nsA, 'orders.creds'), undefined);
    const nsB = defaultCopyNamespace('tenant-b', 'iso');
    const bCopies = await svc.core.listNamespacedConfigMap({ namespace: nsB }).catch(() => ({ items: [] }));
    assert.equal(bCopies.items.filter((c) => c.metadata?.name?.startsWith('b-')).length, 0, 'tenant b has no primary, so nothing of it is copied');
  });
});

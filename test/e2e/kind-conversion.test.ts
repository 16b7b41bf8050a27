// A related rule whose destination is another kind (ConfigMap → Secret,
// Secret → ConfigMap) against real API servers: the service cluster accepts
// the converted copies, their bytes are the source's, changes and dropped
// keys arrive, drift is repaired, and relsync's own converted copies do not
// make it write again (a copy that read back differently from what was
// written would be rewritten on every event of its own write).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../harness/kube.js';
import { startTenants, type RelsyncFixture } from '../harness/relsync-fixture.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const b64 = (bytes: string | number[]) => Buffer.from(bytes as never).toString('base64');
/** A copy's keys as bytes (hex), whichever of data (text or base64) and binaryData holds them. */
const bytesOf = (maps: { text?: Record<string, string> | undefined; base64?: Record<string, string> | undefined }) => ({
  ...Object.fromEntries(Object.entries(maps.text ?? {}).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('hex')])),
  ...Object.fromEntries(Object.entries(maps.base64 ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('hex')])),
});

describe('related copies of another kind: ConfigMap ↔ Secret', () => {
  let t: RelsyncFixture<'tenant-a'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  const ns = defaultCopyNamespace('tenant-a', 'conv');

  before(async () => {
    t = await startTenants('kind-conversion', ['tenant-a'], {
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [
        { id: 'config-as-secret', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' }, destination: { resource: 'secrets' } },
        { id: 'creds-as-config', origin: 'platform', kind: 'Secret', reference: { path: '.spec.secretName' }, destination: { kind: 'ConfigMap' } },
      ] }],
    });
    ({ 'tenant-a': a, service: svc } = t.clusters.client);
  });

  after(() => t?.stop());

  it('copies a ConfigMap as a Secret and a Secret as a ConfigMap, byte for byte, and follows changes, dropped keys and drift', async () => {
    await a.ensureNamespace('conv');
    const configText = { 'app.conf': 'port = 8080\nname = ünïcödé ✓\n', empty: '' };
    const logo = [0x89, 0x50, 0x4e, 0x47, 0x00, 0xff];
    await a.core.createNamespacedConfigMap({ namespace: 'conv', body: { metadata: { name: 'app-config', labels: { app: 'shop' } }, data: configText, binaryData: { 'logo.bin': b64(logo) } } });
    const der = [0x30, 0x82, 0xff, 0xfe];
    // A typed Secret: the ConfigMap copy cannot keep its type.
    await a.core.createNamespacedSecret({ namespace: 'conv', body: { metadata: { name: 'app-creds' }, type: 'kubernetes.io/basic-auth', data: { username: b64('admin'), password: b64('s3cret'), 'key.der': b64(der) } } });
    await a.createDatabase('conv', 'orders', { configMapName: 'app-config', secretName: 'app-creds' });

    // The service cluster accepted both copies (a ConfigMap's data sent unconverted as a Secret's is refused: illegal base64).
    const secret = await eventually('the ConfigMap arrives as a Secret', () => svc.secret(ns, 'app-config'), 30_000);
    assert.equal(secret.type, 'Opaque');
    assert.equal(secret.metadata?.labels?.app, 'shop');
    assert.deepEqual(bytesOf({ base64: secret.data }), bytesOf({ text: configText, base64: { 'logo.bin': b64(logo) } }), 'base64-decoded, every key is the ConfigMap\'s bytes');
    const configMap = await eventually('the Secret arrives as a ConfigMap', () => svc.configMap(ns, 'app-creds'), 30_000);
    assert.deepEqual(configMap.data, { username: 'admin', password: 's3cret' }, 'UTF-8 values as text');
    assert.deepEqual(configMap.binaryData, { 'key.der': b64(der) }, 'other bytes as binaryData');

    // A change of each source, which also drops a key; once the change arrived (one write each), the key is gone.
    await a.core.replaceNamespacedConfigMap({ namespace: 'conv', name: 'app-config', body: { metadata: { name: 'app-config', labels: { app: 'shop' } }, data: { ...configText, 'app.conf': 'port = 9090\n' } } });
    const changed = await eventually('the ConfigMap change arrives', async () => {
      const s = await svc.secret(ns, 'app-config');
      return s?.data?.['app.conf'] === b64('port = 9090\n') ? s : undefined;
    }, 30_000);
    assert.deepEqual(Object.keys(changed.data ?? {}).sort(), ['app.conf', 'empty'], 'the dropped binaryData key is gone from the Secret');
    await a.core.replaceNamespacedSecret({ namespace: 'conv', name: 'app-creds', body: { metadata: { name: 'app-creds' }, type: 'kubernetes.io/basic-auth', data: { username: b64('admin'), password: b64('rotated') } } });
    const rotated = await eventually('the Secret change arrives', async () => {
      const c = await svc.configMap(ns, 'app-creds');
      return c?.data?.password === 'rotated' ? c : undefined;
    }, 30_000);
    assert.deepEqual({ data: rotated.data, binaryData: rotated.binaryData }, { data: { username: 'admin', password: 'rotated' }, binaryData: undefined }, 'the dropped key is gone from the ConfigMap');

    // Drift on a converted copy is repaired.
    await svc.putSecret(ns, 'app-config', { 'app.conf': 'tampered' });
    await eventually('the edited Secret copy is repaired', async () => (await svc.secret(ns, 'app-config'))?.data?.['app.conf'] === b64('port = 9090\n'), 30_000);

    // Settled: a marker change of the primary arrives at its copy, and neither converted copy was written
    // meanwhile (each read back as relsync wrote it, so its own events brought no rewrite).
    const versions = async () => [(await svc.secret(ns, 'app-config'))?.metadata?.resourceVersion, (await svc.configMap(ns, 'app-creds'))?.metadata?.resourceVersion];
    const settled = await versions();
    await a.updateDatabase('conv', 'orders', (db) => (db.spec = { ...db.spec, marker: 'm1' }));
    await eventually('the marker change arrives', async () => (await svc.database(ns, 'orders'))?.spec?.marker === 'm1', 30_000);
    assert.deepEqual(await versions(), settled, 'no converted copy was written again');
  });
});

// Mutation rules (api-syncagent's spec.mutation and related[].mutation), driven by a PublishedResource
// manifest: the copy holds the mutated spec, the status comes back mutated, a related object's copy
// holds its mutated content; drift of the copy is set back to the mutated value, and relsync's own
// writes cause no further write (the up-to-date check compares with what was mutated).
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { metricTotal, startRelsync, writePublishedConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const MANIFEST = `
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: publish-databases
spec:
  resource: { apiGroup: demo.relsync.dev, versions: [v1alpha1], kind: Database }
  mutation:
    spec:
      - delete: { path: spec.debug }
      - regex: { path: spec.host, pattern: "^(.*)\\\\.example\\\\.com$", replacement: "\\\\1.internal" }
      - template: { path: spec.owner, template: "{{ .Object.metadata.namespace }}/{{ .Object.metadata.name }}" }
    status:
      - regex: { path: status.url, pattern: "internal", replacement: "example.com" }
  related:
    - identifier: config
      origin: kcp
      kind: ConfigMap
      mutation:
        spec:
          - delete: { path: data.scratch }
          - regex: { path: data.mode, pattern: "^debug$", replacement: "normal" }
          # does not fit a ConfigMap (data.size is a string): said on the primary, nothing else changes
          - template: { path: data.size.unit, template: "MiB" }
      object:
        reference:
          path: spec.configMapName
`;

const NS = 'mut';

describe('mutation rules (PublishedResource spec.mutation, related[].mutation)', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;
  const copyNs = defaultCopyNamespace('tenant-a', NS);

  const written = () => metricTotal(relsync.httpPort, 'relsync_copies_written_total');

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-mutation-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    const { configPath } = writePublishedConfig(dir, { platform: pa.kubeconfigPath, service: ps.kubeconfigPath }, MANIFEST);
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
    await a.ensureNamespace(NS);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('copies the primary with its spec mutated, and a related object with its content mutated', async () => {
    await a.putConfigMap(NS, 'orders-config', { mode: 'debug', size: 's', scratch: 'x' });
    await a.createDatabase(NS, 'orders', { configMapName: 'orders-config', host: 'orders.example.com', debug: true, engine: 'postgres' });
    const copy = await svc.copyOf(copyNs, 'orders');
    assert.deepEqual(copy.spec, { configMapName: 'orders-config', host: 'orders.internal', owner: 'mut/orders', engine: 'postgres' });
    const related = await eventually('the related copy', () => svc.configMap(copyNs, 'orders-config'), 30_000);
    assert.deepEqual(related.data, { mode: 'normal', size: 's' });
    assert.equal((await a.database(NS, 'orders'))?.spec?.debug, true, 'the source keeps what the copy does not');
    const problem = await eventually('the rule that did not fit, said on the primary', async () => (await a.events(NS, 'orders')).find((e) => e.reason === 'MutationProblem'), 30_000);
    assert.match(problem.message ?? '', /the copy of .*orders-config: .*mutation\.spec\[2\]: the path \.?data\.size\.unit goes through something that is not a map/);
  });

  it('brings the status back mutated', async () => {
    await svc.updateDatabase(copyNs, 'orders', (db) => void (db.status = { url: 'https://orders.internal:5432' }), 'status');
    await eventually('the mutated status on the primary', async () => (await a.database(NS, 'orders'))?.status?.url === 'https://orders.example.com:5432', 30_000);
  });

  it('sets a copy someone changed back to the mutated value', async () => {
    await svc.updateDatabase(copyNs, 'orders', (db) => void (db.spec = { ...db.spec, host: 'elsewhere' }));
    await eventually('the copy set back', async () => (await svc.database(copyNs, 'orders'))?.spec?.host === 'orders.internal', 30_000);
  });

  it('writes nothing more for its own writes: the copy is compared with what was mutated', async () => {
    const before = await written();
    // Marker: one related change, synced; its arrival proves the events before it were handled.
    await a.putConfigMap(NS, 'orders-config', { mode: 'debug', size: 'm', scratch: 'y' });
    await eventually('the marker synced', async () => (await svc.configMap(copyNs, 'orders-config'))?.data?.size === 'm', 30_000);
    assert.deepEqual((await svc.configMap(copyNs, 'orders-config'))?.data, { mode: 'normal', size: 'm' });
    assert.equal(await written(), before + 1, 'exactly the marker\'s write');
  });
});

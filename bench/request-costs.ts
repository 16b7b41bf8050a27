/**
 * What each kind of request relsync makes costs a real kube-apiserver and
 * etcd, in CPU seconds per 1,000 requests, side by side in one run: a create
 * (what the floor bulk copier makes), a server-side apply that creates, one
 * that changes nothing, a label-selector LIST in a namespace of many objects
 * (a selector or inverse rule's LIST), a GET, a PUT (a finalizer), and the
 * cost of the watches that see every write. It says where an initial sync's
 * API-server time goes.
 *
 *   node dist/bench/request-costs.js [--objects 5000] [--requests 1000]
 */
import { parseArgs } from 'node:util';
import { startControlPlanes } from '../test/harness/control-plane.js';
import { eventually, installCrd } from '../test/harness/kube.js';
import { GROUP, PLURAL, VERSION } from '../test/harness/tenant.js';
import { Connection } from '../src/kube/connection.js';
import { ResourceClient } from '../src/kube/resource-client.js';
import type { ResourceType } from '../src/core/resource-type.js';
import type { KubeObject } from '../src/core/object.js';
import { cpuSnapshot, cpuSpent } from './cpu-usage.js';

const { values: args } = parseArgs({ options: { objects: { type: 'string', default: '5000' }, requests: { type: 'string', default: '1000' } } });
const OBJECTS = Number(args.objects);
const REQUESTS = Number(args.requests);
const CONCURRENCY = 32;
const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const namespaces: ResourceType = { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false };
/** The custom resource the bench's primaries are (examples/crd.yaml). */
const databases: ResourceType = { group: GROUP, version: VERSION, resource: PLURAL, kind: 'Database', namespaced: true };

async function pool(count: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < count) await fn(next++);
  }));
}

function configMap(namespace: string, name: string, labels: Record<string, string> = {}): KubeObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace, name, labels }, data: { key: `value of ${name}`, other: 'x'.repeat(200) } } as KubeObject;
}

const [plane] = await startControlPlanes('costs');
const connection = new Connection({ name: 'costs', kubeconfig: plane!.kubeconfigPath });
const cms = new ResourceClient(connection, configMaps);
const dbs = new ResourceClient(connection, databases);
await installCrd(plane!.kubeConfig);
await eventually('the CRD served', async () => (await dbs.listPage({ namespace: 'default', limit: 1 }).then(() => true, () => undefined)));
const nss = new ResourceClient(connection, namespaces);
for (const ns of ['big', 'created', 'applied', 'watched']) await nss.create('', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } as KubeObject);
await pool(OBJECTS, (i) => cms.create('big', configMap('big', `cm-${i}`, { app: `p${i}` })));

const rows: Array<[string, number, number]> = [];
async function measure(what: string, run: () => Promise<void>): Promise<void> {
  const before = cpuSnapshot();
  const started = Date.now();
  await run();
  const ms = Date.now() - started;
  const spent = cpuSpent(before, cpuSnapshot());
  const perThousand = (s: number | undefined) => Math.round(((s ?? 0) * 1000 * 100) / REQUESTS) / 100;
  rows.push([what, perThousand(spent['kube-apiserver']), perThousand(spent.etcd)]);
  console.log(`${what}: ${ms} ms; per 1,000 requests: kube-apiserver ${perThousand(spent['kube-apiserver'])} s, etcd ${perThousand(spent.etcd)} s, client ${perThousand(spent.bench)} s`);
}

await measure('POST create', () => pool(REQUESTS, (i) => cms.create('created', configMap('created', `c-${i}`))));
await measure('server-side apply, creating', () => pool(REQUESTS, (i) => cms.apply(configMap('applied', `a-${i}`), 'bench')));
await measure('server-side apply, unchanged', () => pool(REQUESTS, (i) => cms.apply(configMap('applied', `a-${i}`), 'bench')));
await measure('server-side apply, changed', () => pool(REQUESTS, (i) => cms.apply({ ...configMap('applied', `a-${i}`), data: { key: 'changed' } } as KubeObject, 'bench')));
await measure('GET', () => pool(REQUESTS, (i) => cms.get('created', `c-${i}`)));
await measure('PUT (a finalizer added)', () => pool(REQUESTS, async (i) => {
  const cm = (await cms.get('created', `c-${i}`))!;
  await cms.replace({ ...cm, metadata: { ...cm.metadata, finalizers: ['bench.relsync.dev/f'] } });
}));
await measure(`label-selector LIST in a namespace of ${OBJECTS}`, () => pool(REQUESTS, async (i) => {
  await cms.listAll({ namespace: 'big', labelSelector: `app=p${i % OBJECTS}` });
}));
const database = (namespace: string, name: string, size = 1): KubeObject => ({ apiVersion: `${GROUP}/${VERSION}`, kind: 'Database', metadata: { namespace, name }, spec: { configMapName: `${name}-ref`, size } } as KubeObject);
await measure('custom resource: POST create', () => pool(REQUESTS, (i) => dbs.create('created', database('created', `d-${i}`))));
await measure('custom resource: server-side apply, creating', () => pool(REQUESTS, (i) => dbs.apply(database('applied', `d-${i}`), 'bench')));
await measure('custom resource: server-side apply, unchanged', () => pool(REQUESTS, (i) => dbs.apply(database('applied', `d-${i}`), 'bench')));
await measure('custom resource: PUT (a finalizer added)', () => pool(REQUESTS, async (i) => {
  const d = (await dbs.get('created', `d-${i}`))!;
  await dbs.replace({ ...d, metadata: { ...d.metadata, finalizers: ['bench.relsync.dev/f'] } });
}));
// Three watches of every ConfigMap, as relsync's watches see its own writes.
const { resourceVersion } = await cms.listPage({ limit: 1 });
const abort = new AbortController();
let seen = 0;
const watches = await Promise.all([0, 1, 2].map(() => cms.watch({ resourceVersion, timeoutSeconds: 600, signal: abort.signal })));
const reading = watches.map(async (w) => {
  for await (const line of w) if (line.includes('"ADDED"')) seen++;
});
await measure('POST create, seen by 3 watches', async () => {
  await pool(REQUESTS, (i) => cms.create('watched', configMap('watched', `w-${i}`)));
  while (seen < 3 * REQUESTS) await new Promise((r) => setTimeout(r, 20));
});
abort.abort();
for (const w of watches) w.close();
await Promise.allSettled(reading);

console.log('\n| request | kube-apiserver CPU s / 1,000 | etcd CPU s / 1,000 |\n|---|---|---|');
for (const [what, api, etcd] of rows) console.log(`| ${what} | ${api} | ${etcd} |`);
connection.close();
process.exit(0);

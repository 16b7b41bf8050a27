// The kcp that kcp mode will be tested against: a real `kcp start` built from
// the Go module proxy, a provider workspace exporting the Database type with
// permission claims, two consumer workspaces binding it, and its virtual
// workspace seen across workspaces (`/clusters/*`) and written per workspace.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { bindDatabaseExport, createDatabaseExport, createWorkspaces, startKcp, virtualWorkspaceUrl, type Kcp } from '../harness/kcp.js';
import { eventually } from '../harness/kube.js';

interface Item {
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  data?: Record<string, string>;
}

describe('kcp harness', () => {
  let kcp: Kcp;
  let clusters: Record<string, string>;
  let vw: string;

  before(async () => {
    const startedAt = Date.now();
    kcp = await startKcp();
    console.log(`kcp ready in ${Date.now() - startedAt} ms`);
    clusters = await createWorkspaces(kcp, 'provider', 'consumer-a', 'consumer-b');
    await createDatabaseExport(kcp, 'root:provider');
    for (const c of ['consumer-a', 'consumer-b']) await bindDatabaseExport(kcp, `root:${c}`, 'root:provider');
    vw = await virtualWorkspaceUrl(kcp, 'root:provider');
    console.log(`provider, two bound consumers and the virtual workspace ${vw} ready ${Date.now() - startedAt} ms after start`);
  });

  after(async () => {
    await kcp?.stop();
  });

  const put = async (path: string, body: unknown) => {
    const res = await kcp.request('POST', path, body);
    assert.equal(res.status, 201, `POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  };

  it('shows both workspaces through the virtual workspace, each object marked with its logical cluster', async () => {
    for (const c of ['consumer-a', 'consumer-b']) {
      await put(`/clusters/root:${c}/api/v1/namespaces/default/configmaps`, { metadata: { name: 'settings' }, data: { from: c } });
      await put(`/clusters/root:${c}/apis/demo.relsync.dev/v1alpha1/namespaces/default/databases`, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { name: 'orders' }, spec: { configMapName: 'settings' } });
    }
    const databases = await eventually('both Databases listed', async () => {
      const list = await kcp.request<{ items: Item[] }>('GET', `${vw}/clusters/*/apis/demo.relsync.dev/v1alpha1/databases`);
      return list.status === 200 && list.body.items.length === 2 ? list.body.items : undefined;
    }, 30_000);
    assert.deepEqual(databases.map((d) => d.metadata.annotations?.['kcp.io/cluster']).sort(), [clusters['consumer-a'], clusters['consumer-b']].sort());
    const configMaps = (await kcp.request<{ items: Item[] }>('GET', `${vw}/clusters/*/api/v1/configmaps`)).body.items.filter((c) => c.metadata.name === 'settings');
    assert.deepEqual(configMaps.map((c) => `${c.metadata.annotations?.['kcp.io/cluster']}=${c.data?.from}`).sort(), [`${clusters['consumer-a']}=consumer-a`, `${clusters['consumer-b']}=consumer-b`].sort(), 'claimed ConfigMaps come through the permission claim');
  });

  it('writes into one workspace through /clusters/<logical cluster> of the virtual workspace', async () => {
    const a = clusters['consumer-a']!;
    // The virtual workspace insists on apiVersion and kind (a workspace itself does not).
    await put(`${vw}/clusters/${a}/api/v1/namespaces/default/secrets`, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'credentials' }, data: { password: Buffer.from('p').toString('base64') } });
    const inA = await kcp.request<Item>('GET', `/clusters/root:consumer-a/api/v1/namespaces/default/secrets/credentials`);
    assert.equal(inA.status, 200);
    const inB = await kcp.request('GET', `/clusters/root:consumer-b/api/v1/namespaces/default/secrets/credentials`);
    assert.equal(inB.status, 404, 'the other workspace is untouched');
  });

  it('drops a workspace that unbinds the export from the wildcard list', async () => {
    const res = await kcp.request('DELETE', '/clusters/root:consumer-b/apis/apis.kcp.io/v1alpha2/apibindings/demo.relsync.dev');
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await eventually('only consumer-a is listed', async () => {
      const list = await kcp.request<{ items: Item[] }>('GET', `${vw}/clusters/*/apis/demo.relsync.dev/v1alpha1/databases`);
      const seen = list.body.items?.map((d) => d.metadata.annotations?.['kcp.io/cluster']);
      return seen?.length === 1 && seen[0] === clusters['consumer-a'];
    }, 60_000);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { ApiError } from '../../../src/kube/api-error.js';
import type { Connection, RequestOptions } from '../../../src/kube/connection.js';
import { DryRunClient, DryRunLedger } from '../../../src/kube/dry-run-client.js';
import { CREATE_ONLY } from '../../../src/kube/resource-client.js';
import { viewOf } from '../../../src/cli/change-diff.js';

const secrets: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };

/** An API server holding `objects`, that answers reads only: any other request fails the test. */
function readOnlyServer(objects: KubeObject[]) {
  return {
    request: async <T>(method: string, path: string, options: RequestOptions = {}): Promise<T> => {
      assert.equal(method, 'GET', `${method} ${path} was sent`);
      const name = path.split('/').pop()!;
      const found = objects.find((o) => o.metadata.name === name);
      // As Connection.request answers a read that takes the object's NotFound as absent.
      if (!found && options.absentAs === name) return undefined as T;
      if (!found) throw new ApiError('GET', path, 404, JSON.stringify({ kind: 'Status', reason: 'NotFound', message: 'not found', details: { name } }));
      return structuredClone(found) as T;
    },
  } as unknown as Connection;
}

const secret = (name: string, extra: Partial<KubeObject['metadata']> = {}, data: Record<string, string> = { password: 'c2VjcmV0' }): KubeObject => ({
  apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: 'ns', uid: `uid-${name}`, resourceVersion: '5', ...extra }, data,
});

describe('dry run: writes recorded, never sent, with the API server\'s preconditions', () => {
  it('a create-only apply over an existing object is a 409, as the real sweep meets it; nothing recorded', async () => {
    const ledger = new DryRunLedger();
    const client = new DryRunClient(readOnlyServer([secret('foreign')]), secrets, undefined, ledger, 'service');
    await assert.rejects(client.apply({ ...secret('foreign'), metadata: { name: 'foreign', namespace: 'ns', resourceVersion: CREATE_ONLY } }, 'relsync'), (err: unknown) => err instanceof ApiError && err.statusCode === 409);
    assert.deepEqual(ledger.list(), []);
  });

  it('a stale resourceVersion or another uid is a 409; a failed JSON-patch test a 422', async () => {
    const client = new DryRunClient(readOnlyServer([secret('copy')]), secrets, undefined, new DryRunLedger(), 'service');
    await assert.rejects(client.replace(secret('copy', { resourceVersion: '4' })), /409/);
    await assert.rejects(client.apply(secret('copy', { uid: 'another' }), 'relsync'), /409/);
    await assert.rejects(client.jsonPatch('ns', 'copy', [{ op: 'test', path: '/metadata/uid', value: 'another' }, { op: 'remove', path: '/metadata/labels' }]), /422/);
    await assert.rejects(client.delete('ns', 'copy', 'another'), /409/);
  });

  it('what it would write is read back in the same run: a created object is there, a deleted one gone, one held by finalizers being deleted', async () => {
    const ledger = new DryRunLedger();
    const client = new DryRunClient(readOnlyServer([secret('gone'), secret('held', { finalizers: ['operator.example/cleanup'] })]), secrets, undefined, ledger, 'service');
    const created = await client.apply({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'new', namespace: 'ns' }, data: { a: 'YQ==' } }, 'relsync');
    assert.deepEqual((await client.get('ns', 'new'))?.data, { a: 'YQ==' });
    await client.apply({ ...created, data: { a: 'Yg==' } }, 'relsync');
    await client.delete('ns', 'gone', 'uid-gone');
    assert.equal(await client.get('ns', 'gone'), undefined);
    await client.delete('ns', 'held');
    assert.ok((await client.get('ns', 'held'))?.metadata.deletionTimestamp);
    const views = ledger.list().map(viewOf);
    assert.deepEqual(views.map((v) => `${v.action} ${v.object}`), ['create service:secrets:ns/new', 'delete service:secrets:ns/gone', 'update service:secrets:ns/held']);
  });

  it("finalizers set and metadata read go through the ledger: nothing sent, the version checked, a deleted object's metadata gone", async () => {
    const ledger = new DryRunLedger();
    const client = new DryRunClient(readOnlyServer([secret('primary'), secret('copy')]), secrets, undefined, ledger, 'service');
    await assert.rejects(client.setFinalizers('ns', 'primary', '4', ['relsync.dev/a']), /409/);
    const set = await client.setFinalizers('ns', 'primary', '5', ['relsync.dev/a']);
    assert.deepEqual(set.metadata.finalizers, ['relsync.dev/a']);
    assert.equal((set as { data?: unknown }).data, undefined, 'answered as metadata');
    assert.deepEqual((await client.get('ns', 'primary'))?.metadata.finalizers, ['relsync.dev/a'], 'read back in the same run');
    assert.deepEqual((await client.get('ns', 'primary'))?.data, { password: 'c2VjcmV0' });
    await client.delete('ns', 'copy', 'uid-copy');
    assert.equal(await client.getMetadata('ns', 'copy'), undefined, 'a copy the run deleted is gone');
    assert.equal((await client.getMetadata('ns', 'primary'))?.metadata.uid, 'uid-primary');
    const status = await client.patchStatus('ns', 'primary', (await client.get('ns', 'primary'))?.metadata.resourceVersion, { conditions: [{ type: 'X' }] });
    assert.deepEqual(status?.status, { conditions: [{ type: 'X' }] });
    await assert.rejects(client.patchStatus('ns', 'primary', '5', { conditions: [] }), /409/, 'at a stale version');
    assert.deepEqual(ledger.list().map(viewOf).map((v) => `${v.action} ${v.object}`), ['update service:secrets:ns/primary', 'delete service:secrets:ns/copy']);
  });

  it('never builds a path from "." or ".." (URL resolution would make it a LIST of the type)', () => {
    const client = new DryRunClient(readOnlyServer([]), secrets, undefined, new DryRunLedger(), 'service');
    assert.throws(() => client.path('ns', '..'), /not an object's name/);
    assert.throws(() => client.path('.', 'x'), /not an object's name/);
    assert.equal(client.path('ns', 'a.b'), '/api/v1/namespaces/ns/secrets/a.b');
  });

  it('prints no Secret value and no last-applied configuration, of a created, changed or deleted object', async () => {
    const lastApplied = { 'kubectl.kubernetes.io/last-applied-configuration': '{"data":{"password":"c2VjcmV0"}}' };
    const ledger = new DryRunLedger();
    const client = new DryRunClient(readOnlyServer([secret('changed', { annotations: lastApplied }), secret('removed', { annotations: lastApplied })]), secrets, undefined, ledger, 'service');
    await client.apply({ ...secret('changed'), metadata: { name: 'changed', namespace: 'ns', annotations: { ...lastApplied, other: 'x' } }, data: { password: 'bmV3' } }, 'relsync');
    await client.apply({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'made', namespace: 'ns', annotations: lastApplied }, data: { password: 'c2VjcmV0' } }, 'relsync');
    await client.delete('ns', 'removed');
    const printed = JSON.stringify(ledger.list().map(viewOf));
    assert.doesNotMatch(printed, /c2VjcmV0|bmV3/);
    assert.match(printed, /data\.password/, 'that the value changes is said');
  });

  it('prints no value of a ConfigMap that is a copy of a Secret (a rule copying a Secret\'s content into a ConfigMap)', async () => {
    const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
    const ledger = new DryRunLedger();
    const client = new DryRunClient(readOnlyServer([]), configMaps, undefined, ledger, 'service');
    const marks = { 'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'secrets', 'relsync.dev/source-namespace': 'ns', 'relsync.dev/source-name': 'db' };
    await client.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'db', namespace: 'ns', annotations: marks }, data: { password: 'hunter2-plain' } }, 'relsync');
    await client.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'plain', namespace: 'ns' }, data: { greeting: 'hello' } }, 'relsync');
    const printed = JSON.stringify(ledger.list().map(viewOf));
    assert.doesNotMatch(printed, /hunter2/);
    assert.match(printed, /data\.password/, 'that the value is written is said');
    assert.match(printed, /hello/, 'a ConfigMap of a ConfigMap shows its values');
  });
});

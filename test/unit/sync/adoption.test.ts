import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import type { KubeObject } from '../../../src/core/object.js';
import { adoptionRefusal } from '../../../src/sync/adoption.js';
import { adoptionGrant } from '../../../src/core/marks.js';
import { ADOPT_ANNOTATION } from '../../../src/core/relsync-keys.js';

const source: ObjectIdentity = { cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'default', name: 'orders-config' };
const granted = (grant: string, metadata: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'orders-config', namespace: 'shared', uid: 'u1', resourceVersion: '1', ...metadata, annotations: { ...metadata.annotations, [ADOPT_ANNOTATION]: grant } },
});

describe('adoption: an object is taken over only when granted to exactly this agent and source', () => {
  it('adopts an object granted to this agent and source', () => {
    assert.equal(adoptionRefusal(granted(adoptionGrant('e2e', source)), 'e2e', source), undefined);
  });

  it('refuses a grant for any other source: another tenant\'s same-named object, another type, namespace or name', () => {
    for (const other of [{ cluster: 'tenant-b' }, { resource: 'secrets' }, { group: 'x.example' }, { namespace: 'prod' }, { name: 'orders' }]) {
      assert.match(adoptionRefusal(granted(adoptionGrant('e2e', { ...source, ...other })), 'e2e', source) ?? '', /grants it to another agent or source/, JSON.stringify(other));
    }
    assert.match(adoptionRefusal(granted(adoptionGrant('other', source)), 'e2e', source) ?? '', /another agent or source/);
    // The grant is compared as text: a reordered or padded JSON is no grant (nothing is parsed that could be read two ways).
    const { cluster, group, resource, namespace, name } = source;
    assert.ok(adoptionRefusal(granted(JSON.stringify({ cluster, agent: 'e2e', group, resource, namespace, name })), 'e2e', source));
    assert.ok(adoptionRefusal(granted(`${adoptionGrant('e2e', source)} `), 'e2e', source));
  });

  it('refuses an object without a grant, being deleted, with an agent\'s marks or relsync keys, or with a controller', () => {
    const grant = adoptionGrant('e2e', source);
    const cases: Array<[KubeObject, RegExp]> = [
      [{ ...granted(grant), metadata: { name: 'orders-config', namespace: 'shared' } }, /no relsync\.dev\/adopt annotation/],
      [granted(grant, { deletionTimestamp: '2026-12-05T00:00:00Z' }), /being deleted/],
      [granted(grant, { labels: { 'relsync.dev/agent': 'other' } }), /marks of relsync agent "other"/],
      [granted(grant, { labels: { 'relsync.dev/agent': 'e2e' } }), /marks of relsync agent "e2e"/],
      [granted(grant, { annotations: { 'relsync.dev/source-cluster': 'tenant-b' } }), /relsync's keys relsync\.dev\/source-cluster/],
      [granted(grant, { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'operator', uid: 'd', controller: true }] }), /has a controller \(Deployment operator\)/],
    ];
    for (const [object, expected] of cases) assert.match(adoptionRefusal(object, 'e2e', source) ?? '', expected);
    // An owner that is not a controller (garbage collection only) writes nothing: no refusal.
    assert.equal(adoptionRefusal(granted(grant, { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'x' }] }), 'e2e', source), undefined);
  });
});

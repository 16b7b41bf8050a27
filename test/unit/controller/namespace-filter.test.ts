// Namespace selectors: which primaries a platform namespace's change reaches, with a real SQLite
// store. A relabel that flips a verdict reaches the stored primaries (stopped) or the listed ones
// (started); one that does not flip it, or that concerns another tenant's namespace, reaches none.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { NamespaceFilter } from '../../../src/controller/namespace-filter.js';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import { buildSelector } from '../../../src/core/label-selector.js';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { Template } from '../../../src/rules/template.js';
import { openStore, type OpenedStore } from '../../../src/store/database.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';

const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const resource: ResolvedResource = {
  type: databases, selector: undefined, namespaceSelector: buildSelector({ matchLabels: { sync: 'yes' } }).selector, where: 'resources[0]', primaryType: databases, copyType: databases,
  naming: { namespace: Template.parse('{{ cluster }}-{{ namespace }}', ['cluster', 'namespace']), name: Template.parse('{{ name }}', ['name']) },
  related: [], rules: [],
};
const ns = (name: string, labels: Record<string, string> = {}): KubeObject => ({ metadata: { name, labels } });
const db = (cluster: string, namespace: string, name: string): ObjectIdentity => ({ cluster, group: databases.group, resource: databases.resource, namespace, name });

describe('namespace filter', () => {
  let opened: OpenedStore;
  let filter: NamespaceFilter;
  let listedCalls: string[];
  let enqueued: string[] = [];

  before(async () => {
    opened = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-nsfilter-')), 'relsync.db'));
    const store = new RelationStore(opened);
    await store.saveReconcile({ id: db('a', 'team', 'stored'), uid: 'u1', copy: { ...db('service', 'copy', 'stored') }, state: 'synced', message: null }, []);
    await store.saveReconcile({ id: db('b', 'team', 'other-tenant'), uid: 'u2', copy: { ...db('service', 'copy-b', 'other-tenant') }, state: 'synced', message: null }, []);
    filter = new NamespaceFilter({
      resources: [resource],
      store,
      logger: pino({ level: 'silent' }),
      enqueue: (key) => enqueued.push(`${key.id.cluster}/${key.id.namespace}/${key.id.name}`),
      // What a LIST of the namespace finds: a primary the store does not know yet.
      primariesIn: async (cluster, _type, namespace) => {
        listedCalls.push(`${cluster}/${namespace}`);
        return [db(cluster, namespace, 'new')];
      },
    });
  });
  after(async () => opened.close());

  /** Reconciled at once (the stored primaries) and once the LIST answered (those it found). */
  const names = async (cluster: string, o: KubeObject, change: string, keep = true) => {
    listedCalls = [];
    enqueued = [];
    const now = (await filter.changed(cluster, o, change, keep)).map((k) => `${k.id.cluster}/${k.id.namespace}/${k.id.name}`);
    await filter.settled();
    return [...new Set([...now, ...enqueued])].sort();
  };

  it('reaches nothing at the first sight of a matching namespace in a LIST, and no LIST is made', async () => {
    assert.deepEqual(await names('a', ns('team', { sync: 'yes' }), 'LIST'), []);
    assert.deepEqual(listedCalls, []);
  });

  it('reaches nothing when a change leaves the verdict as it was', async () => {
    assert.deepEqual(await names('a', ns('team', { sync: 'yes', other: 'x' }), 'MODIFIED'), []);
    assert.deepEqual(listedCalls, []);
  });

  it('reaches the stored primaries when the namespace stops matching, without a LIST', async () => {
    assert.deepEqual(await names('a', ns('team', { sync: 'no' }), 'MODIFIED'), ['a/team/stored']);
    assert.deepEqual(listedCalls, []);
  });

  it('reaches the listed and stored primaries, once each, when it starts matching', async () => {
    assert.deepEqual(await names('a', ns('team', { sync: 'yes' }), 'MODIFIED'), ['a/team/new', 'a/team/stored']);
    assert.deepEqual(listedCalls, ['a/team']);
  });

  it('counts a first sight by an event (a watch resumed after a change made while stopped) as a change', async () => {
    assert.deepEqual(await names('b', ns('team', {}), 'MODIFIED'), ['b/team/other-tenant'], 'only that cluster\'s stored primaries');
    assert.deepEqual(await names('c', ns('team', { sync: 'yes' }), 'MODIFIED'), ['c/team/new'], 'nothing stored there: what the LIST finds');
    assert.deepEqual(await names('d', ns('team', { sync: 'yes' }), 'ADDED'), [], 'a new namespace: its primaries come as events of their own, no LIST');
    assert.deepEqual(listedCalls, []);
  });

  it('changes no verdict on a LIST page that may be older than events handled (a kcp workspace relist)', async () => {
    assert.deepEqual(await names('a', ns('team', { sync: 'no' }), 'LIST', false), ['a/team/stored'], 'what it shows not matching: the stored primaries read their namespace');
    assert.deepEqual(await names('a', ns('team', { sync: 'yes', x: '1' }), 'MODIFIED'), [], 'the verdict (matching) was not overwritten by the page');
  });

  it('at the first sight of a namespace that does not match, in a LIST, reaches its stored primaries', async () => {
    assert.deepEqual(await names('b', ns('fresh', {}), 'LIST'), []);
    const before = await names('b', ns('team', {}), 'DELETED');
    assert.deepEqual(before, ['b/team/other-tenant'], 'a deleted namespace selects nothing');
    assert.deepEqual(await names('b', ns('team', {}), 'LIST'), ['b/team/other-tenant'], 'forgotten when deleted: a first sight again');
  });
});

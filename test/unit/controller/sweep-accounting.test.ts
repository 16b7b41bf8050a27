// What a sweep learns from its one read of the store: the copies the store
// accounts for (a copy missing here is looked at by the orphan check), and
// the relations its reconciles added and removed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import { SweepAccounting } from '../../../src/controller/sweep-accounting.js';

const id = (cluster: string, resource: string, name: string): ObjectIdentity => ({ cluster, group: '', resource, namespace: 'ns', name });
const primary = (name: string) => ({ id: id('tenant-a', 'databases', name), copy: id('service', 'databases', name) });
const relation = (ruleId: string, name: string) => ({ ruleId, source: id('tenant-a', 'configmaps', name), destination: id('service', 'configmaps', name) });

describe('sweep accounting', () => {
  it('accounts for the copies of what it read, and of a reconciled primary only as the store holds it after', () => {
    const a = new SweepAccounting();
    a.read(primary('kept'), [relation('cfg', 'shared')], false);
    a.read(primary('changed'), [relation('cfg', 'shared'), relation('cfg', 'dropped')], true);
    assert.ok(a.accounts(primary('kept').id, primary('kept').copy));
    assert.ok(a.accounts(relation('cfg', 'shared').source, relation('cfg', 'shared').destination));
    assert.ok(!a.accounts(relation('cfg', 'dropped').source, relation('cfg', 'dropped').destination), 'not before its reconcile is read again');
    assert.ok(!a.accounts(relation('cfg', 'shared').source, relation('cfg', 'other').destination), 'a pair, not a source or a copy alone');

    assert.deepEqual(a.reconciled(primary('changed').id, primary('changed'), [relation('cfg', 'shared'), relation('sel', 'new')]), { added: 1, removed: 1 });
    assert.ok(a.accounts(primary('changed').id, primary('changed').copy));
    assert.ok(a.accounts(relation('sel', 'new').source, relation('sel', 'new').destination));
    assert.ok(!a.accounts(relation('cfg', 'dropped').source, relation('cfg', 'dropped').destination), 'the relation its reconcile dropped');
    assert.ok(a.accounts(relation('cfg', 'shared').source, relation('cfg', 'shared').destination), "the shared copy is still the other primary's");
  });

  it('counts a new primary and a deleted one', () => {
    const a = new SweepAccounting();
    a.read(primary('gone'), [relation('cfg', 'g1'), relation('cfg', 'g2')], true);
    assert.deepEqual(a.reconciled(primary('gone').id, undefined, []), { added: 0, removed: 2 });
    assert.ok(!a.accounts(primary('gone').id, primary('gone').copy));
    assert.deepEqual(a.reconciled(primary('new').id, primary('new'), [relation('cfg', 'n1')]), { added: 1, removed: 0 }, 'not in the store when it was read');
    assert.ok(a.accounts(primary('new').id, primary('new').copy));
  });

  it('tells one rule from another for the same source', () => {
    const a = new SweepAccounting();
    a.read(primary('p'), [relation('cfg', 'x')], true);
    assert.deepEqual(a.reconciled(primary('p').id, primary('p'), [relation('other', 'x')]), { added: 1, removed: 1 });
  });
});

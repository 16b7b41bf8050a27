import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { explainQuery } from '../../../src/controller/explain.js';

describe('explain query: what an /explain request may name', () => {
  it('reads TYPE and [NAMESPACE/]NAME', () => {
    assert.deepEqual(explainQuery('databases.demo.relsync.dev', 'shop/orders', 'tenant-a'), { group: 'demo.relsync.dev', resource: 'databases', namespace: 'shop', name: 'orders', cluster: 'tenant-a' });
    assert.deepEqual(explainQuery('secrets', 'g1'), { group: '', resource: 'secrets', namespace: '', name: 'g1' });
  });

  it('refuses what is no object\'s name: empty, ".", "..", a "/" in a name or a cluster', () => {
    for (const [type, object, cluster] of [['', 'a/b'], ['secrets', 'ns/'], ['secrets', 'ns/..'], ['secrets', '../x'], ['secrets', 'ns/a/b'], ['secrets', 'ns/x', '../other'], ['secrets', '.']] as const) {
      assert.equal(typeof explainQuery(type, object, cluster), 'string', `${type} ${object} ${cluster ?? ''}`);
    }
  });
});

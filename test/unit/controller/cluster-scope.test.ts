// Which cluster an object belongs to: a kcp platform's wildcard list is split
// by logical cluster (kcp.io/cluster), workspaces known but absent from the
// list still get their (empty) part so that their stored objects count as
// gone, and objects that cannot be placed (no annotation, a workspace whose
// binding relsync has not seen) are skipped, never misfiled or registered.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { ClusterScope } from '../../../src/controller/cluster-scope.js';
import { ClusterSet } from '../../../src/kube/cluster-set.js';
import { LogicalClusters } from '../../../src/kube/logical-clusters.js';
import type { KubeObject } from '../../../src/core/object.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-scope-'));
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(
  kubeconfig,
  'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n',
);
const object = (name: string, cluster?: string): KubeObject => ({ metadata: { name, namespace: 'default', ...(cluster ? { annotations: { 'kcp.io/cluster': cluster } } : {}) } });

describe('cluster scope', () => {
  it('splits a kcp list by logical cluster and keeps a plain cluster’s list whole', async () => {
    const logical = await LogicalClusters.load(undefined);
    await logical.bound('ws-a', 'kcp');
    await logical.bound('ws-b', 'kcp');
    await logical.bound('ws-gone', 'kcp');
    await logical.unbound('ws-gone', 'kcp');
    const clusters = new ClusterSet({ name: 'service', kubeconfig, context: undefined }, [
      { name: 'kcp', kubeconfig, context: undefined, kcp: { endpointSlice: 'demo', url: undefined } },
      { name: 'tenant-a', kubeconfig, context: undefined },
    ], { logicalClusters: logical });
    const scope = new ClusterScope(clusters, logical, pino({ level: 'silent' }));

    const parts = scope.split('kcp', [object('one', 'ws-a'), object('two', 'ws-b'), object('three', 'ws-a'), object('stray'), object('elsewhere', 'ws-other'), object('clash', 'kcp')]);
    assert.deepEqual(
      Object.fromEntries([...parts].map(([c, items]) => [c, items.map((i) => i.metadata.name)])),
      { 'ws-a': ['one', 'three'], 'ws-b': ['two'], 'ws-gone': [] },
      'unannotated objects and those of workspaces whose binding was not seen are skipped',
    );
    assert.deepEqual(logical.of('kcp').sort(), ['ws-a', 'ws-b', 'ws-gone'], 'objects never register a workspace');
    assert.equal(scope.of('kcp', object('x', 'ws-a')), 'ws-a');
    assert.equal(clusters.isPlatform('ws-a'), true);
    assert.equal(clusters.isPlatform('kcp'), false, 'the wildcard connection is no identity cluster');
    assert.equal(clusters.metricsName('ws-a'), 'kcp', 'metrics count workspaces under their platform');
    assert.equal(clusters.get('ws-a').connection.name, 'kcp/ws-a');

    const plain = scope.split('tenant-a', [object('x', 'ws-a')]);
    assert.deepEqual([...plain.keys()], ['tenant-a'], 'a Kubernetes platform ignores kcp annotations');
    clusters.close();
  });
});

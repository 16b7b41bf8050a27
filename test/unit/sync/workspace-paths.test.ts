import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../src/core/object.js';
import { ApiError } from '../../../src/kube/api-error.js';
import type { ObjectReads } from '../../../src/cache/object-reads.js';
import { WorkspacePaths } from '../../../src/sync/workspace-paths.js';

const clusters = { get: (name: string) => ({ kind: name.startsWith('lc-') ? ('logical' as const) : ('kubernetes' as const) }) };

/** Reads that answer the LogicalCluster `cluster` of each workspace with `answer`, counting requests. */
function reads(answer: (cluster: string) => KubeObject | undefined | Error): ObjectReads & { count: number } {
  const r = {
    count: 0,
    async get(cluster: string, type: { resource: string }, _ns: string, name: string) {
      r.count++;
      assert.deepEqual([type.resource, name], ['logicalclusters', 'cluster']);
      const a = answer(cluster);
      if (a instanceof Error) throw a;
      return a;
    },
    async list() {
      return [];
    },
  };
  return r;
}
const logicalCluster = (path: string | undefined): KubeObject => ({ apiVersion: 'core.kcp.io/v1alpha1', kind: 'LogicalCluster', metadata: { name: 'cluster', ...(path !== undefined ? { annotations: { 'kcp.io/path': path } } : {}) } });

describe('workspace paths', () => {
  it('reads a workspace\'s path once, and a Kubernetes cluster\'s is its name', async () => {
    const paths = new WorkspacePaths(clusters);
    const r = reads(() => logicalCluster('root:org:team-1'));
    assert.equal(await paths.of(r, 'lc-1'), 'root:org:team-1');
    assert.equal(await paths.of(r, 'lc-1'), 'root:org:team-1');
    assert.equal(r.count, 1);
    assert.equal(paths.cached('lc-1'), 'root:org:team-1');
    assert.equal(await paths.of(r, 'tenant-a'), 'tenant-a');
    assert.equal(r.count, 1);
    assert.equal(paths.cached('lc-2'), undefined, 'never read: an edge sync takes the full reconcile');
    // The longest path taken, and one more character refused.
    assert.equal(await paths.of(reads(() => logicalCluster(`r${'a'.repeat(511)}`)), 'lc-3'), `r${'a'.repeat(511)}`);
    await assert.rejects(paths.of(reads(() => logicalCluster(`r${'a'.repeat(512)}`)), 'lc-4'), /not a workspace path/);
  });

  it('refuses what is not a workspace path (the tenant writes it), a missing one, and a LogicalCluster it may not read, asking again only after a while', async () => {
    for (const [answer, expected] of [
      [logicalCluster(undefined), /has no kcp\.io\/path annotation/],
      [logicalCluster('root:Team'), /not a workspace path/],
      [logicalCluster(`root:${'a'.repeat(600)}`), /not a workspace path/],
      [logicalCluster('root:org:team-1\nx'), /not a workspace path/],
      [undefined, /accept the APIExport's permission claim for logicalclusters\.core\.kcp\.io/],
      [new ApiError('GET', '/x', 403, '{"kind":"Status","reason":"Forbidden","message":"no"}'), /accept the APIExport's permission claim/],
    ] as const) {
      const paths = new WorkspacePaths(clusters);
      const r = reads(() => answer as KubeObject | undefined | Error);
      await assert.rejects(paths.of(r, 'lc-1'), expected);
      await assert.rejects(paths.of(r, 'lc-1'), expected);
      assert.equal(r.count, 1, 'a failure is remembered for a while, not asked again for each primary');
    }
    // Anything else (an outage) is the reconcile's to retry, and not remembered.
    const paths = new WorkspacePaths(clusters);
    const r = reads(() => new ApiError('GET', '/x', 503, 'down'));
    await assert.rejects(paths.of(r, 'lc-1'), /503|down/);
    await assert.rejects(paths.of(r, 'lc-1'));
    assert.equal(r.count, 2);
  });
});

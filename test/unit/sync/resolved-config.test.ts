// What only discovery can tell about a config: here, a related rule's type that
// turns out to be cluster-scoped, on either side, is refused at start with its
// place in the config. Discovery is a stand-in that answers from a table (what
// the API servers would say of each type); the rule itself is what is tested.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseConfig } from '../../../src/config/load-config.js';
import type { TypeReference } from '../../../src/core/resource-type.js';
import type { ClusterSet } from '../../../src/kube/cluster-set.js';
import { resolveConfig } from '../../../src/sync/resolved-config.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-resolve-'));
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');

/** Types by resource: kind and scope, as discovery would answer (`scoped` per cluster where they differ). */
const served: Record<string, { kind: string; group: string; namespaced: boolean | Record<string, boolean> }> = {
  databases: { kind: 'Database', group: 'demo.relsync.dev', namespaced: true },
  configmaps: { kind: 'ConfigMap', group: '', namespaced: true },
  clusterroles: { kind: 'ClusterRole', group: 'rbac.authorization.k8s.io', namespaced: false },
  // A CRD installed namespaced on the platform and cluster-scoped in the service cluster.
  gateways: { kind: 'Gateway', group: 'demo.relsync.dev', namespaced: { 'tenant-a': true, service: false } },
};

const clusters = {
  service: { name: 'service', kind: 'kubernetes' },
  platforms: [{ name: 'tenant-a', kind: 'kubernetes' }],
  async resolve(cluster: string, ref: TypeReference) {
    const [resource, type] = Object.entries(served).find(([r, t]) => r === ref.resource || t.kind === ref.kind) ?? [];
    if (!resource || !type) throw new Error(`not served: ${ref.resource ?? ref.kind}`);
    const namespaced = typeof type.namespaced === 'boolean' ? type.namespaced : type.namespaced[cluster]!;
    return { group: type.group, version: 'v1', resource, kind: type.kind, namespaced };
  },
} as unknown as ClusterSet;

const resolving = (rule: string) => {
  const yaml = `platformClusters:\n  - { name: tenant-a, kubeconfig: ${kubeconfig} }\nresources:\n  - { group: demo.relsync.dev, resource: databases, related: [${rule}] }\n`;
  return resolveConfig(parseConfig(yaml, join(dir, 'relsync.yaml')), clusters);
};

describe('related rules of cluster-scoped types', () => {
  it('are refused at start, at the rule\'s place, saying why', async () => {
    await assert.rejects(resolving('{ id: roles, origin: platform, group: rbac.authorization.k8s.io, resource: clusterroles, template: { name: "{{ name }}" } }'), /^ResolveError: resources\[0\]\.related\[0\]: clusterroles\.rbac\.authorization\.k8s\.io are cluster-scoped: a source of that type is no one tenant's/);
    await assert.rejects(resolving('{ id: roles, origin: service, group: rbac.authorization.k8s.io, resource: clusterroles, template: { name: "{{ name }}" } }'), /resources\[0\]\.related\[0\]: clusterroles\.rbac\.authorization\.k8s\.io are cluster-scoped/);
  });

  it('are refused where the type is cluster-scoped on the side the copies go to only', async () => {
    await assert.rejects(resolving('{ id: gw, origin: platform, group: demo.relsync.dev, resource: gateways, template: { name: "{{ name }}" } }'), /resources\[0\]\.related\[0\]: gateways\.demo\.relsync\.dev are cluster-scoped where it is copied to \(the service cluster\)/);
  });

  it('leave namespaced types alone', async () => {
    const [resource] = await resolving('{ id: config, origin: platform, resource: configmaps, template: { name: "{{ name }}" } }');
    assert.equal(resource!.rules[0]!.sourceType.namespaced, true);
  });
});

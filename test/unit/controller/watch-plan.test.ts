// Which watches relsync runs: each (cluster, type) once, unfiltered where any
// rule reads all of a type, and the service cluster's namespaces that this
// agent made wherever copies go into namespaces.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { planWatches } from '../../../src/controller/watch-plan.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { Template } from '../../../src/rules/template.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';

const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const clusterDbs: ResourceType = { ...databases, resource: 'clusterdatabases', kind: 'ClusterDatabase', namespaced: false };
const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const rule = (id: string, type: ResourceType, origin: 'platform' | 'service' = 'platform'): ResolvedRule => ({
  id, origin, source: type, destination: type, sourceNamespace: undefined, destinationNamespace: undefined, provenance: undefined, where: `resources[0].related.${id}`, sourceType: type, destinationType: type,
  finder: { kind: 'template', name: Template.parse('{{ name }}', ['name']), destinationName: undefined },
});
const published = (primaryType: ResourceType, rules: ResolvedRule[]): ResolvedResource => ({
  type: primaryType, selector: undefined, where: 'resources[0]', primaryType, related: [], rules,
  naming: { namespace: Template.parse('{{ cluster }}-{{ namespace }}', ['cluster', 'namespace']), name: Template.parse('{{ name }}', ['name']) },
});
const summary = (resources: ResolvedResource[]) => planWatches(resources, 'svc', ['a', 'b'], 'e2e').map((w) => `${w.cluster}/${w.type.resource}${w.labelSelector ? `?${w.labelSelector}` : ''}`).sort();

describe('watch plan', () => {
  it('watches the namespaces this agent made in the service cluster, filtered, where copies go into namespaces', () => {
    assert.deepEqual(summary([published(databases, [rule('config', configMaps)])]), [
      'a/configmaps', 'a/databases', 'b/configmaps', 'b/databases',
      'svc/configmaps?relsync.dev/agent=e2e', 'svc/databases?relsync.dev/agent=e2e', 'svc/namespaces?relsync.dev/agent=e2e',
    ]);
  });

  it('does not watch namespaces when no copy goes into one', () => {
    assert.deepEqual(summary([published(clusterDbs, [])]), ['a/clusterdatabases', 'b/clusterdatabases', 'svc/clusterdatabases?relsync.dev/agent=e2e']);
    // Service-origin copies go to the platforms: no service-side namespace to check.
    assert.ok(!summary([published(clusterDbs, [rule('back', configMaps, 'service')])]).some((w) => w.startsWith('svc/namespaces')));
    assert.ok(summary([published(clusterDbs, [rule('config', configMaps)])]).includes('svc/namespaces?relsync.dev/agent=e2e'), 'a related copy of a namespaced type');
  });
});

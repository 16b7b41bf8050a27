import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError } from '../../../src/config/config-problem.js';
import { parseConfig } from '../../../src/config/load-config.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-safety-'));
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');

function problems(resources: string, clusters = ['tenant-a', 'tenant-b']): string {
  const yaml = `platformClusters:\n${clusters.map((c) => `  - { name: ${c}, kubeconfig: ${kubeconfig} }`).join('\n')}\nresources:\n${resources}`;
  try {
    parseConfig(yaml, join(dir, 'relsync.yaml'));
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems.map((p) => `${p.path}: ${p.message}`).join('\n');
  }
  return '';
}

const db = (extra = '') => `  - { group: demo.relsync.dev, resource: databases${extra} }\n`;

/** The warnings a config that loads gets (`path: message` lines); `kcp`: its one platform is kcp. */
function warnings(resources: string, platforms: 'plain' | 'kcp' = 'plain'): string {
  const clusters = platforms === 'kcp' ? `  - { name: kcp, kubeconfig: ${kubeconfig}, kcp: { apiExportEndpointSlice: demo.relsync.dev } }` : `  - { name: tenant-a, kubeconfig: ${kubeconfig} }`;
  const config = parseConfig(`platformClusters:\n${clusters}\nresources:\n${resources}`, join(dir, 'relsync.yaml'));
  return (config.notices ?? []).filter((n) => n.level === 'warn').map((n) => `${n.path}: ${n.message}`).join('\n');
}

describe('configs that would let a tenant reach what is not its own', () => {
  it('accepts the defaults', () => {
    assert.equal(problems(db()), '');
    assert.equal(problems(db(', related: [{ id: s, origin: service, resource: secrets, template: { name: x }, namespace: { source: "{{ object.spec.ns }}" } }]')), '', 'a templated source namespace is safe with the default provenance');
  });

  it('refuses a second resource with the same primary type', () => {
    assert.match(problems(db() + db(', selector: { matchLabels: { a: b } }')), /^resources\[1\]: the same primary type as resources\[0\]/m);
  });

  it('lists every problem in the order of the file: a resource\'s own before the next one\'s', () => {
    const paths = problems(db(", naming: { namespace: '{{ namespace }}' }") + db(', selector: { matchLabels: { a: b } }')).split('\n').map((line) => line.split(':')[0]);
    assert.deepEqual(paths, ['resources[0].naming', 'resources[1]']);
  });

  it('refuses naming templates that send two clusters\' sources to one copy', () => {
    for (const [template, pair] of [
      ['{{ namespace }}', /namespace "billing" of cluster "acme" and namespace "billing" of cluster "other"/],
      ['{{ join "-" cluster namespace }}', /namespace "prod-billing" of cluster "acme" and namespace "billing" of cluster "acme-prod"/],
      ['{{ join "-" cluster namespace | trunc 63 }}', /cluster "acme"/],
      ['{{ cluster | trunc 20 }}-{{ namespace | trunc 20 }}', /cluster "acme-prod"/],
      ['{{ object.spec.target }}', /cluster/],
    ] as const) {
      assert.match(problems(db(`, naming: { namespace: '${template}' }`)), new RegExp(`resources\\[0\\]\\.naming: renders the same copy for .*${pair.source}`), template);
    }
    // A workspace path is the tenant's to write (kcp lets a workspace's admin change it): it keeps no one apart.
    assert.match(problems(db(`, workspacePath: true, naming: { namespace: '{{ replace ":" "-" clusterPath }}-{{ namespace }}' }`)), /resources\[0\]\.naming: renders the same copy for .*cluster "acme"/);
    assert.equal(problems(db(`, workspacePath: true, naming: { namespace: '{{ replace ":" "-" clusterPath }}-{{ hash cluster namespace | trunc 16 }}' }`)), '');
    assert.match(problems(db(', naming: { namespace: x, name: "{{ cluster }}-{{ name }}" }')), /namespace "billing" of cluster "acme" and namespace "billing" of cluster "acme-prod"/, 'cluster and name joined');
    assert.equal(problems(db(', naming: { namespace: "{{ cluster }}-{{ hash cluster namespace | trunc 16 }}" }')), '');
    assert.equal(problems(db(', naming: { namespace: "x", name: "{{ hash cluster namespace name | trunc 20 }}" }')), '', 'a name that keeps them apart is as good');
    assert.equal(problems(db(', naming: { namespace: "{{ namespace }}" }'), ['tenant-a']), '', 'one plain cluster cannot collide with another');
  });

  it('refuses a templated service-side destination namespace that two clusters share', () => {
    const rule = (ns: string) => db(`, related: [{ id: r, origin: platform, resource: configmaps, template: { name: x }, namespace: { destination: '${ns}' } }]`);
    assert.match(problems(rule('{{ namespace }}')), /resources\[0\]\.related\[0\]\.namespace\.destination: renders the same service-cluster namespace/);
    assert.equal(problems(rule('shared')), '', 'a constant namespace is shared by choice');
    assert.equal(problems(rule('x-{{ hash cluster namespace | trunc 16 }}')), '');
  });

  it('refuses anyInNamespace for a namespace other than the copy\'s', () => {
    const rule = (ns: string) => db(`, related: [{ id: r, origin: service, resource: secrets, template: { name: x }, provenance: { anyInNamespace: true }${ns} }]`);
    assert.equal(problems(rule('')), '');
    assert.match(problems(rule(', namespace: { source: "{{ object.spec.ns }}" }')), /resources\[0\]\.related\[0\]\.provenance: anyInNamespace trusts every object/);
    assert.match(problems(rule(', namespace: { source: "shared" }')), /provenance: anyInNamespace/);
  });

  it('refuses provenance a tenant can steer or that trusts more than the copy namespace', () => {
    const rule = (extra: string, naming = '') => db(`${naming}, related: [{ id: r, origin: service, resource: secrets, ${extra} }]`);
    assert.match(problems(rule('template: { name: x }, provenance: { label: { key: k, value: "{{ object.spec.owner }}" } }')), /related\[0\]\.provenance\.label\.value: reads the object/);
    assert.match(problems(rule('inverse: { label: o, namespaceFrom: { label: n } }, provenance: { anyInNamespace: true }')), /anyInNamespace with inverse\.namespaceFrom/);
    assert.match(problems(rule('template: { name: x }, provenance: { anyInNamespace: true }', ', naming: { namespace: shared, name: "{{ hash cluster namespace name | trunc 20 }}" }')), /does not keep to one tenant namespace/);
    assert.equal(problems(rule('template: { name: x }, provenance: { label: { key: k, value: "{{ cluster }}.{{ name }}" } }')), '');
    // A workspace path is the tenant's to write: tenant A could state B's and meet B's label value.
    assert.match(problems(rule('template: { name: x }, provenance: { label: { key: k, value: "{{ clusterPath }}.{{ name }}" } }', ', workspacePath: true')), /related\[0\]\.provenance\.label\.value: reads the workspace path, which the tenant writes/);
  });

  it('refuses a platform-origin destination namespace that reads the object: the tenant would pick a namespace of the provider\'s cluster', () => {
    const rule = (ns: string) => db(`, related: [{ id: r, origin: platform, resource: configmaps, template: { name: x }, namespace: { destination: '${ns}' } }]`);
    for (const clusters of [['tenant-a'], ['tenant-a', 'tenant-b']]) {
      const found = problems(rule('{{ object.spec.landing }}'), clusters);
      assert.match(found, /^resources\[0\]\.related\[0\]\.namespace\.destination: reads the object, which the tenant writes: its copies could go into any namespace of the service cluster/m, clusters.join());
      assert.equal(found.split('\n').length, 1, `one problem at that path: ${found}`);
      assert.match(problems(rule('x-{{ hash cluster namespace | trunc 8 }}-{{ object.spec.landing }}'), clusters), /namespace\.destination: reads the object/);
    }
    assert.equal(problems(rule('x-{{ hash cluster namespace | trunc 16 }}')), '', 'built from cluster and namespace');
    // On the platform side (origin service) the namespace is the tenant's own cluster's: a warning, below.
    assert.equal(problems(db(', related: [{ id: r, origin: service, resource: secrets, template: { name: x }, namespace: { destination: "{{ object.spec.landing }}" } }]'), ['tenant-a']), '');
  });

  it('refuses a provenance label without cluster where the source namespace is not one tenant\'s', () => {
    const rule = (value: string, ns = '', naming = '') => db(`${naming}, related: [{ id: r, origin: service, resource: secrets, template: { name: x }, provenance: { label: { key: k, value: "${value}" } }${ns} }]`);
    const at = /^resources\[0\]\.related\[0\]\.provenance\.label\.value: does not use cluster, and /m;
    assert.match(problems(rule('{{ namespace }}.{{ name }}', ', namespace: { source: "{{ object.spec.from }}" }')), new RegExp(`${at.source}namespace\\.source reads the object, which the tenant writes`, 'm'));
    assert.match(problems(rule('{{ name }}', ', namespace: { source: shared }')), new RegExp(`${at.source}namespace\\.source does not use cluster, so sources of several clusters share it`, 'm'));
    assert.match(problems(rule('{{ namespace }}.{{ name }}', '', ', naming: { namespace: shared, name: "{{ hash cluster namespace name | trunc 20 }}" }')), /provenance\.label\.value: does not use cluster, and the copy namespace \(naming\.namespace\) does not use cluster/);
    assert.match(problems(rule('{{ name }}', ', namespace: { source: "{{ clusterPath }}" }', ', workspacePath: true')), /namespace\.source reads the workspace path/);
    assert.equal(problems(rule('{{ cluster }}.{{ namespace }}.{{ name }}', ', namespace: { source: "{{ object.spec.from }}" }')), '', 'the value keeps tenants apart');
    assert.equal(problems(rule('{{ namespace }}.{{ name }}')), '', 'the default copy namespace is one tenant namespace\'s');
    assert.equal(problems(rule('{{ name }}', ', namespace: { source: "creds-{{ hash cluster namespace | trunc 16 }}" }')), '', 'a source namespace of the tenant\'s own');
    assert.equal(problems(rule('{{ name }}', ', namespace: { source: shared }'), ['tenant-a']), '', 'one plain cluster: no other cluster\'s primaries');
  });

  it('warns of a platform-side namespace the tenant steers and of a platform-origin namespaceFrom, on plain platforms only', () => {
    const source = db(', related: [{ id: r, origin: platform, resource: configmaps, template: { name: x }, namespace: { source: "{{ object.spec.from }}" } }]');
    assert.match(warnings(source), /^resources\[0\]\.related\[0\]\.namespace\.source: reads the object, which the tenant writes: related objects are read from any namespace of its platform cluster the tenant names, another tenant's too where one platform cluster's namespaces belong to different tenants/);
    const destination = db(', related: [{ id: r, origin: service, resource: secrets, template: { name: x }, namespace: { destination: "{{ object.spec.to }}" } }]');
    assert.match(warnings(destination), /^resources\[0\]\.related\[0\]\.namespace\.destination: reads the object, which the tenant writes: related objects are written into any namespace/);
    const inverse = db(', related: [{ id: r, origin: platform, resource: configmaps, inverse: { label: o, namespaceFrom: { label: n } } }]');
    assert.match(warnings(inverse), /^resources\[0\]\.related\[0\]\.inverse\.namespaceFrom: an object in any namespace of a platform cluster can name a primary of another namespace as its owner/);
    for (const config of [source, destination, inverse]) assert.equal(warnings(config, 'kcp'), '', 'a kcp workspace is one tenant\'s, its namespaces too');
    assert.equal(warnings(db(', related: [{ id: r, origin: platform, resource: configmaps, template: { name: x }, namespace: { source: "config-{{ namespace }}" } }]')), '', 'not the object');
    assert.equal(warnings(db(', related: [{ id: r, origin: service, resource: secrets, inverse: { label: o, namespaceFrom: { label: n } } }]')), '', 'a service-side namespaceFrom is the operator\'s to write');
    assert.equal(warnings(db(', related: [{ id: r, origin: service, resource: secrets, template: { name: x }, namespace: { source: "{{ object.spec.from }}" } }]')), '', 'a service-side source namespace: provenance decides');
  });

  it('refuses a constant namespace that is not a namespace name', () => {
    assert.match(problems(db(', related: [{ id: r, origin: service, resource: secrets, template: { name: x }, namespace: { source: "Not_A_Namespace" } }]')), /related\[0\]\.namespace\.source: "Not_A_Namespace" is not a valid namespace name/);
  });

  it('is what relsync validate says', async () => {
    const { spawnSync } = await import('node:child_process');
    const file = join(dir, 'unsafe.yaml');
    writeFileSync(file, `platformClusters:\n  - { name: a, kubeconfig: ${kubeconfig} }\n  - { name: b, kubeconfig: ${kubeconfig} }\nresources:\n${db(', naming: { namespace: "{{ namespace }}" }')}`);
    const cli = new URL('../../../src/cli/main.js', import.meta.url).pathname;
    const run = spawnSync(process.execPath, [cli, 'validate', '--config', file], { encoding: 'utf8' });
    assert.equal(run.status, 2);
    assert.match(run.stderr, /resources\[0\]\.naming: renders the same copy/);
  });
});

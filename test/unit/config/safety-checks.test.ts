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

describe('configs that would let a tenant reach what is not its own', () => {
  it('accepts the defaults', () => {
    assert.equal(problems(db()), '');
    assert.equal(problems(db(', related: [{ id: s, origin: service, resource: secrets, template: { name: x }, namespace: { source: "{{ object.spec.ns }}" } }]')), '', 'a templated source namespace is safe with the default provenance');
  });

  it('refuses a second resource with the same primary type', () => {
    assert.match(problems(db() + db(', selector: { matchLabels: { a: b } }')), /^resources\[1\]: the same primary type as resources\[0\]/m);
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

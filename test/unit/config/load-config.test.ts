import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError } from '../../../src/config/config-problem.js';
import { parseConfig } from '../../../src/config/load-config.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-config-'));
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');

function problems(yaml: string): string[] {
  try {
    parseConfig(yaml, join(dir, 'relsync.yaml'));
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems.map((p) => `${p.path}: ${p.message}`);
  }
  return [];
}

const base = (related: string) => `
platformClusters:
  - name: tenant-a
    kubeconfig: ${kubeconfig}
resources:
  - group: demo.relsync.dev
    resource: databases
    related:
${related}
`;

describe('config', () => {
  it('accepts a valid config and fills in the defaults', () => {
    const config = parseConfig(base('      - { id: cfg, origin: platform, resource: configmaps, reference: { path: .spec.cfg } }'), join(dir, 'relsync.yaml'));
    assert.equal(config.agentName, 'relsync');
    assert.equal(config.serviceCluster.name, 'service');
    assert.equal(config.serviceCluster.kubeconfig, undefined, 'no kubeconfig means in-cluster config');
    assert.equal(config.storePath, join(dir, 'relsync.db'), 'relative paths are relative to the config file');
    assert.equal(config.workers, 4);
    assert.equal(config.resources[0]!.naming.name.source, '{{ name }}');
    assert.equal(config.limits.parsedBytes, 72 * 1024 * 1024);
    assert.equal(config.limits.parsedBytesInFlight, 144 * 1024 * 1024, 'twice parsedBytes');
  });

  it('makes the parse budget twice a raised parse cap unless it is given', () => {
    const raised = parseConfig(`${base('      - { id: cfg, origin: platform, resource: configmaps, reference: { path: .spec.cfg } }')}limits: { parsedBytes: 100000000 }\n`, join(dir, 'relsync.yaml'));
    assert.equal(raised.limits.parsedBytesInFlight, 200_000_000);
    const given = parseConfig(`${base('      - { id: cfg, origin: platform, resource: configmaps, reference: { path: .spec.cfg } }')}limits: { parsedBytesInFlight: 80000000 }\n`, join(dir, 'relsync.yaml'));
    assert.equal(given.limits.parsedBytesInFlight, 80_000_000);
  });

  it('accepts a related rule that writes its source\'s own type, or a ConfigMap as a Secret and back, however the types are given', () => {
    const config = parseConfig(base(`      - { id: a, origin: platform, resource: configmaps, template: { name: x }, destination: { kind: Secret } }
      - { id: b, origin: service, kind: Secret, template: { name: x }, destination: { version: v1, resource: configmaps } }
      - { id: c, origin: platform, group: demo.relsync.dev, resource: widgets, template: { name: x }, destination: { group: demo.relsync.dev, version: v1, resource: widgets } }
      - { id: d, origin: platform, resource: secrets, template: { name: x } }`), join(dir, 'relsync.yaml'));
    assert.deepEqual(config.resources[0]!.related.map((r) => [r.destination.resource ?? r.destination.kind]), [['Secret'], ['configmaps'], ['widgets'], ['secrets']]);
  });

  it('names copy namespaces <cluster>-<namespace>-<hash>, cut to a valid namespace name when long', () => {
    const naming = parseConfig(base('      - { id: cfg, origin: platform, resource: configmaps, reference: { path: .spec.cfg } }'), join(dir, 'relsync.yaml')).resources[0]!.naming.namespace;
    const hash = (c: string, n: string) => createHash('sha256').update(`${c}/${n}`).digest('hex').slice(0, 16);
    assert.equal(naming.render({ cluster: 'tenant-a', namespace: 'shop', name: 'x', object: {} }), `tenant-a-shop-${hash('tenant-a', 'shop')}`);
    const long = (s: string) => s.repeat(63).slice(0, 63);
    const a = naming.render({ cluster: long('c'), namespace: `${long('n').slice(0, 60)}abc`, name: 'x', object: {} });
    const b = naming.render({ cluster: long('c'), namespace: `${long('n').slice(0, 60)}xyz`, name: 'x', object: {} });
    assert.ok(a.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(a), a);
    assert.notEqual(a, b, 'names that differ only past the cut stay apart');
  });

  it('gives service-origin rules a provenance, an ownerReference to the copy unless the config says otherwise', () => {
    const config = parseConfig(base(`      - { id: a, origin: service, resource: secrets, template: { name: x } }
      - { id: b, origin: service, resource: secrets, template: { name: x }, provenance: { label: { key: example.com/for, value: "{{ name }}" } } }
      - { id: c, origin: service, resource: secrets, template: { name: x }, provenance: { anyInNamespace: true } }
      - { id: d, origin: platform, resource: secrets, template: { name: x } }`), join(dir, 'relsync.yaml'));
    const [a, b, c, d] = config.resources[0]!.related;
    assert.deepEqual(a!.provenance, { kind: 'ownerReference' });
    assert.equal(b!.provenance?.kind, 'label');
    assert.deepEqual(c!.provenance, { kind: 'anyInNamespace' });
    assert.equal(d!.provenance, undefined, 'a platform-side source is the tenant\'s own');
    const found = problems(base(`      - { id: a, origin: platform, resource: secrets, template: { name: x }, provenance: { ownerReference: true } }
      - { id: b, origin: service, resource: secrets, template: { name: x }, provenance: { ownerReference: true, anyInNamespace: true } }`)).join('\n');
    assert.match(found, /resources\[0\]\.related\[0\]\.provenance: only a rule with origin: service/);
    assert.match(found, /resources\[0\]\.related\[1\]\.provenance: give exactly one of "ownerReference", "label" or "anyInNamespace"/);
    const badKey = problems(base('      - { id: c, origin: service, resource: secrets, template: { name: x }, provenance: { label: { key: "bad key!", value: x } } }')).join('\n');
    assert.match(badKey, /resources\[0\]\.related\[0\]\.provenance\.label\.key: /);
  });

  it('names the exact path of every problem', () => {
    const found = problems(base(`      - { id: a, origin: platform, resource: configmaps, reference: { path: ".spec..x" } }
      - { id: b, origin: platform, resource: secrets, reference: { path: .spec.x, rewrite: { regex: { pattern: "(", replacement: "" } } } }
      - { id: c, origin: platform, resource: secrets, template: { name: "{{ nme }}" } }
      - { id: c, origin: platform, resource: secrets, template: { name: x }, reference: { path: .x } }
      - { id: e, origin: platform, template: { name: x } }
      - { id: f, origin: platform, resource: secrets, template: { name: x }, typo: 1 }`));
    const expected = [
      /^resources\[0\]\.related\[3\]: give exactly one way/,
      /^resources\[0\]\.related\[4\]\.resource: give exactly one of "resource" or "kind"/,
      /^resources\[0\]\.related\[5\]: Unrecognized key: "typo"/,
      /^resources\[0\]\.related\[3\]\.id: duplicate rule id "c"/,
    ];
    for (const e of expected) assert.ok(found.some((f) => e.test(f)), `expected ${e} in:\n${found.join('\n')}`);
    const compiled = problems(base(`      - { id: a, origin: platform, resource: configmaps, reference: { path: ".spec..x" } }
      - { id: b, origin: platform, resource: secrets, reference: { path: .spec.x, rewrite: { regex: { pattern: "(", replacement: "" } } } }
      - { id: c, origin: platform, resource: secrets, template: { name: "{{ nme }}" } }`));
    assert.match(compiled.join('\n'), /resources\[0\]\.related\[0\]\.reference\.path: invalid path/);
    assert.match(compiled.join('\n'), /resources\[0\]\.related\[1\]\.reference\.rewrite\.regex\.pattern: invalid regular expression/);
    assert.match(compiled.join('\n'), /resources\[0\]\.related\[2\]\.template\.name: template "\{\{ nme \}\}": unknown variable/);
  });

  it('rejects YAML syntax errors, missing files and clashing cluster names', () => {
    assert.match(problems('platformClusters: [').join('\n'), /^line/);
    assert.match(problems(`platformClusters: [{ name: tenant-x, kubeconfig: /nonexistent }]\nresources: [{ resource: secrets }]`).join('\n'), /platformClusters\[0\]\.kubeconfig: file \/nonexistent does not exist/);
    assert.match(problems(`platformClusters: [{ name: service, kubeconfig: ${kubeconfig} }]\nresources: [{ resource: secrets }]`).join('\n'), /serviceCluster\.name: "service" is also the name of platformClusters\[0\]/);
    assert.match(problems(`platformClusters: []\nresources: []`).join('\n'), /platformClusters: Too small/);
    assert.match(problems(`platformClusters: [{ name: a, kubeconfig: ${kubeconfig} }]\nresources: [{ resource: secrets, selector: { matchLabels: { "bad key": x } } }]`).join('\n'), /resources\[0\]\.selector\.matchLabels\.bad key: label key/);
  });
});

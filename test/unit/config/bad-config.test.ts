// Bad config, field by field: each mistake gives exactly one problem, at the
// path of the field that is wrong. Hand-written cases for every kind of field,
// and property-based cases (fast-check) for the fields that are little
// languages: JSONPaths, templates, label keys and values, regexes, cron.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { ConfigError } from '../../../src/config/config-problem.js';
import { parseConfig } from '../../../src/config/load-config.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-bad-config-'));
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');

type Raw = Record<string, unknown>;
const valid = (): Raw => ({
  platformClusters: [{ name: 'tenant-a', kubeconfig }],
  resources: [
    {
      group: 'demo.relsync.dev',
      resource: 'databases',
      related: [{ id: 'cfg', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }],
    },
  ],
});

/** The problems of a config built from valid() by `edit`, as "path: message". */
function problemsOf(edit: (c: Raw & { resources: Array<Raw & { related: Raw[] }> }) => void): string[] {
  const config = valid() as Raw & { resources: Array<Raw & { related: Raw[] }> };
  edit(config);
  try {
    parseConfig(stringify(config), join(dir, 'relsync.yaml'));
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw new Error(`not a ConfigError: ${String(err)}`, { cause: err });
    return err.problems.map((p) => `${p.path}: ${p.message}`);
  }
}

const rule = (c: { resources: Array<{ related: Raw[] }> }) => c.resources[0]!.related[0]!;

const cases: Array<{ what: string; edit: Parameters<typeof problemsOf>[0]; path: string; says: RegExp }> = [
  { what: 'a cleanup policy on an origin: platform rule', edit: (c) => (rule(c).cleanupPolicy = 'Orphan'), path: 'resources[0].related[0].cleanupPolicy', says: /only a rule with origin: service has a cleanup policy/ },
  { what: 'a cleanup policy that is none', edit: (c) => Object.assign(rule(c), { origin: 'service', cleanupPolicy: 'Never' }), path: 'resources[0].related[0].cleanupPolicy', says: /Orphan|MatchOrigin/ },
  { what: 'a cron expression that is not one', edit: (c) => (c.resync = { schedule: 'every minute' }), path: 'resync.schedule', says: /invalid cron expression "every minute"/ },
  { what: 'a cron field out of range', edit: (c) => (c.resync = { schedule: '61 * * * *' }), path: 'resync.schedule', says: /invalid cron expression/ },
  { what: 'a JSONPath with an empty step', edit: (c) => (rule(c).reference = { path: '.spec..name' }), path: 'resources[0].related[0].reference.path', says: /invalid path/ },
  { what: 'a JSONPath with an unclosed bracket', edit: (c) => (rule(c).reference = { path: '.spec.names[' }), path: 'resources[0].related[0].reference.path', says: /invalid path/ },
  { what: 'an invalid regex', edit: (c) => (rule(c).reference = { path: '.spec.x', rewrite: { regex: { pattern: '([a-z]', replacement: '$1' } } }), path: 'resources[0].related[0].reference.rewrite.regex.pattern', says: /invalid regular expression/ },
  { what: 'a rewrite with a backreference (RE2 has none; a tenant\'s name must not meet a backtracking engine)', edit: (c) => (rule(c).reference = { path: '.spec.x', rewrite: { regex: { pattern: '^(a+)\\1$', replacement: '$1' } } }), path: 'resources[0].related[0].reference.rewrite.regex.pattern', says: /linear time, as Go's RE2 does/ },
  { what: 'a namePattern with Go-only syntax', edit: (c) => (c.resources[0]!.related[0] = { id: 'inv', origin: 'platform', resource: 'configmaps', inverse: { namePattern: '^(?<name>.+)-cfg\\z' } }), path: 'resources[0].related[0].inverse.namePattern', says: /\\z is Go syntax/ },
  { what: 'an invalid label key in the primary selector', edit: (c) => (c.resources[0]!.selector = { matchLabels: { 'no spaces allowed': 'x' } }), path: 'resources[0].selector.matchLabels.no spaces allowed', says: /label key/ },
  { what: 'a label value that is too long', edit: (c) => (c.resources[0]!.selector = { matchLabels: { app: 'x'.repeat(64) } }), path: 'resources[0].selector.matchLabels.app', says: /63/ },
  { what: 'an unknown selector operator', edit: (c) => (c.resources[0]!.selector = { matchExpressions: [{ key: 'app', operator: 'Equals', values: ['x'] }] }), path: 'resources[0].selector.matchExpressions[0].operator', says: /In|NotIn|Exists/ },
  { what: 'an In requirement without values in the primary selector', edit: (c) => (c.resources[0]!.selector = { matchExpressions: [{ key: 'app', operator: 'In' }] }), path: 'resources[0].selector.matchExpressions[0].values', says: /operator In needs at least one value$/ },
  { what: 'a NotIn requirement without values in a rule selector', edit: (c) => (c.resources[0]!.related[0] = { id: 'sel', origin: 'platform', resource: 'configmaps', selector: { matchExpressions: [{ key: 'app', operator: 'NotIn', values: [] }] } }), path: 'resources[0].related[0].selector.matchExpressions[0].values', says: /operator NotIn needs at least one value$/ },
  { what: 'an Exists requirement with values in a rule selector', edit: (c) => (c.resources[0]!.related[0] = { id: 'sel', origin: 'platform', resource: 'configmaps', selector: { matchExpressions: [{ key: 'app', operator: 'Exists', values: ['x'] }] } }), path: 'resources[0].related[0].selector.matchExpressions[0].values', says: /operator Exists takes no values$/ },
  { what: 'a missing kubeconfig file', edit: (c) => ((c.platformClusters as Raw[])[0]!.kubeconfig = join(dir, 'nope.yaml')), path: 'platformClusters[0].kubeconfig', says: /does not exist/ },
  { what: 'duplicate rule ids', edit: (c) => c.resources[0]!.related.push({ id: 'cfg', origin: 'platform', resource: 'secrets', template: { name: 'x' } }), path: 'resources[0].related[1].id', says: /duplicate rule id "cfg"/ },
  { what: 'an unknown origin', edit: (c) => (rule(c).origin = 'sideways'), path: 'resources[0].related[0].origin', says: /platform|service/ },
  { what: 'a number given as a string', edit: (c) => (c.workers = 'four'), path: 'workers', says: /number/ },
  { what: 'a negative lease duration', edit: (c) => (c.leaderElection = { leaseDurationSeconds: -1 }), path: 'leaderElection.leaseDurationSeconds', says: /./ },
  { what: 'a renew deadline longer than the lease', edit: (c) => (c.leaderElection = { leaseDurationSeconds: 5, renewDeadlineSeconds: 8 }), path: 'leaderElection.renewDeadlineSeconds', says: /shorter than leaseDurationSeconds/ },
  { what: 'a parse budget smaller than one answer may take', edit: (c) => (c.limits = { parsedBytes: 96 * 1024 * 1024, parsedBytesInFlight: 64 * 1024 * 1024 }), path: 'limits.parsedBytesInFlight', says: /at least parsedBytes \(one answer alone must fit\)/ },
  { what: 'a parse cap below what an object\'s metadata may take', edit: (c) => (c.limits = { parsedBytes: 1024 * 1024 }), path: 'limits.parsedBytes', says: /16777216/ },
  { what: 'an idle timeout shorter than the watch timeout', edit: (c) => (c.watch = { timeoutSeconds: 60, idleTimeoutSeconds: 30 }), path: 'watch.idleTimeoutSeconds', says: /longer than timeoutSeconds/ },
  { what: 'a cluster name that is not a DNS label', edit: (c) => ((c.platformClusters as Raw[])[0]!.name = 'Tenant_A'), path: 'platformClusters[0].name', says: /DNS label/ },
  { what: 'an agent name that is not a label value', edit: (c) => (c.agentName = 'my agent'), path: 'agentName', says: /label value/ },
  { what: 'a store path that is not a string', edit: (c) => (c.store = { path: 5 }), path: 'store.path', says: /string/ },
  { what: 'a naming template with an unknown variable', edit: (c) => (c.resources[0]!.naming = { name: '{{ nmae }}' }), path: 'resources[0].naming.name', says: /unknown variable "nmae"/ },
  { what: 'a naming template that never closes', edit: (c) => (c.resources[0]!.naming = { namespace: '{{ cluster ' }), path: 'resources[0].naming.namespace', says: /template/ },
  { what: 'an inverse name pattern without the named group', edit: (c) => (c.resources[0]!.related[0] = { id: 'inv', origin: 'platform', resource: 'secrets', inverse: { namePattern: '^(.*)-tls$' } }), path: 'resources[0].related[0].inverse.namePattern', says: /name/ },
  { what: 'a rule with two ways to find objects', edit: (c) => (rule(c).template = { name: 'x' }), path: 'resources[0].related[0]', says: /give exactly one way/ },
  { what: 'a kcp platform with neither endpoint slice nor URL', edit: (c) => ((c.platformClusters as Raw[])[0]!.kcp = {}), path: 'platformClusters[0].kcp', says: /exactly one of "apiExportEndpointSlice" or "virtualWorkspaceUrl"/ },
  { what: 'a kcp platform with both endpoint slice and URL', edit: (c) => ((c.platformClusters as Raw[])[0]!.kcp = { apiExportEndpointSlice: 'x', virtualWorkspaceUrl: 'https://kcp/services/apiexport/c/x' }), path: 'platformClusters[0].kcp', says: /exactly one of/ },
  { what: 'a kcp virtual workspace URL that is not one', edit: (c) => ((c.platformClusters as Raw[])[0]!.kcp = { virtualWorkspaceUrl: 'kcp:6443/services' }), path: 'platformClusters[0].kcp.virtualWorkspaceUrl', says: /URL/i },
  { what: 'a destination of another type than ConfigMap ↔ Secret (a ConfigMap as a CRD)', edit: (c) => (rule(c).destination = { group: 'demo.relsync.dev', resource: 'databases' }), path: 'resources[0].related[0].destination', says: /cannot copy configmaps as databases\.demo\.relsync\.dev: leave "destination" out/ },
  { what: 'a destination of another kind than ConfigMap ↔ Secret (a Secret as a Pod, by kind)', edit: (c) => (c.resources[0]!.related[0] = { id: 'pod', origin: 'service', kind: 'Secret', template: { name: 'x' }, destination: { kind: 'Pod' } }), path: 'resources[0].related[0].destination', says: /cannot copy kind Secret as kind Pod/ },
  { what: 'a destination that is another CRD', edit: (c) => (c.resources[0]!.related[0] = { id: 'w', origin: 'platform', group: 'demo.relsync.dev', resource: 'widgets', template: { name: 'x' }, destination: { group: 'demo.relsync.dev', resource: 'databases' } }), path: 'resources[0].related[0].destination', says: /cannot copy widgets\.demo\.relsync\.dev as databases\.demo\.relsync\.dev/ },
  { what: 'a destination of another version', edit: (c) => (c.resources[0]!.related[0] = { id: 'w', origin: 'platform', group: 'demo.relsync.dev', version: 'v1', resource: 'widgets', template: { name: 'x' }, destination: { group: 'demo.relsync.dev', version: 'v2', resource: 'widgets' } }), path: 'resources[0].related[0].destination', says: /widgets\.demo\.relsync\.dev\/v1 and widgets\.demo\.relsync\.dev\/v2 are different versions/ },
  { what: 'a destination given by kind for a source given by resource (undecidable before discovery)', edit: (c) => (c.resources[0]!.related[0] = { id: 'w', origin: 'platform', group: 'demo.relsync.dev', resource: 'widgets', template: { name: 'x' }, destination: { group: 'demo.relsync.dev', kind: 'Widget' } }), path: 'resources[0].related[0].destination', says: /cannot tell before discovery .* give the destination by "resource"/ },
  { what: 'a misspelt field', edit: (c) => (rule(c).refrence = { path: '.x' }), path: 'resources[0].related[0]', says: /Unrecognized key: "refrence"/ },
];

describe('bad config', () => {
  for (const c of cases) {
    it(`names the path of ${c.what}`, () => {
      const found = problemsOf(c.edit);
      assert.equal(found.length, 1, `exactly one problem expected, got:\n${found.join('\n')}`);
      const [problem] = found as [string];
      assert.ok(problem.startsWith(`${c.path}: `), `expected the path ${c.path} in: ${problem}`);
      assert.match(problem, c.says);
    });
  }

  it('accepts the unedited config', () => {
    assert.deepEqual(problemsOf(() => undefined), []);
  });

  // Properties: whatever string lands in one of these fields, the outcome is
  // a valid config or exactly one problem at that field's path — never a
  // crash, never a problem reported elsewhere.
  const property = (field: string, arbitrary: fc.Arbitrary<string>, put: (c: Parameters<Parameters<typeof problemsOf>[0]>[0], v: string) => void) =>
    it(`reports any bad ${field} at its own path, and nothing else`, () => {
      fc.assert(
        fc.property(arbitrary, (value) => {
          const found = problemsOf((c) => put(c, value));
          return found.length === 0 || (found.length === 1 && found[0]!.startsWith(field) && /^[:.[]/.test(found[0]!.slice(field.length)));
        }),
        { numRuns: 300 },
      );
    });
  const pathChars = fc.string({ unit: fc.constantFrom('.', '[', ']', '*', "'", '"', 'a', 'b', '0', '-', ' ', '$', '@', '?') , maxLength: 16 });
  const templateChars = fc.string({ unit: fc.constantFrom('{', '}', ' ', '|', 'name', 'namespace', 'cluster', 'hash', 'trunc', '6', '.spec.x', '"', 'lower', 'x'), maxLength: 12 });
  const labelChars = fc.string({ unit: fc.constantFrom('a', 'Z', '0', '-', '_', '.', '/', ' ', 'é', 'x'.repeat(30)), maxLength: 10 });

  property('resources[0].related[0].reference.path', fc.oneof(pathChars, fc.string()), (c, v) => (rule(c).reference = { path: v }));
  property('resources[0].related[0].template.name', fc.oneof(templateChars, fc.string()), (c, v) => (c.resources[0]!.related[0] = { id: 't', origin: 'platform', resource: 'secrets', template: { name: v } }));
  property('resources[0].related[0].reference.rewrite.regex.pattern', fc.oneof(fc.string({ unit: fc.constantFrom('(', ')', '[', ']', '?', '<', '>', '*', '+', 'a', '\\', '{', '}', '^', '$'), minLength: 1, maxLength: 10 }), fc.string({ minLength: 1 })), (c, v) => (rule(c).reference = { path: '.spec.x', rewrite: { regex: { pattern: v, replacement: '$1' } } }));
  property('resources[0].selector.matchLabels', fc.tuple(labelChars, labelChars).map(([k, v]) => `${k}\u0000${v}`), (c, kv) => {
    const [k, v] = kv.split('\u0000') as [string, string];
    c.resources[0]!.selector = { matchLabels: { [k]: v } };
  });
  property('resync.schedule', fc.oneof(fc.string({ unit: fc.constantFrom('*', '/', ',', '-', ' ', '1', '5', '9', '60', 'MON', 'x'), maxLength: 14 }), fc.string()), (c, v) => (c.resync = { schedule: v }));
});

describe('copy types', () => {
  it('refuses two resources whose copies would have one type, at the field that says so', () => {
    const found = problemsOf((c) => {
      c.resources.push({ group: 'other.example.com', resource: 'stores', copyAs: { group: 'demo.relsync.dev', resource: 'databases' }, related: [] });
    });
    assert.deepEqual(found, ['resources[1].copyAs: the same copy type as resources[0]: their copies would be taken for each other\'s; give each copy type once']);
  });
});

// A tenant's reference values meet the resolver first: a wildcard over a list of any length, names of
// any length and content. What comes out is bounded by the limit it is given (issue #36, point 2):
// pairs, problems, and the text of each problem.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { parseJsonPath } from '../../../src/rules/json-path.js';
import { MAX_RULE_PROBLEMS, resolveRelated, type ResolveInput } from '../../../src/rules/resolve-related.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { linearRegExp } from '../../../src/util/linear-regexp.js';

const secrets: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };
let rewrites = 0;
const rule: ResolvedRule = {
  id: 'tls', origin: 'platform', source: secrets, destination: secrets,
  finder: { kind: 'reference', path: parseJsonPath('.spec.tlsSecrets[*]'), destinationPath: undefined, rewrite: { kind: 'regex', pattern: { [Symbol.replace]: (v: string) => (rewrites++, `${v}-tls`) } as unknown as RegExp, replacement: '$1-tls' } },
  sourceNamespace: undefined, destinationNamespace: undefined, provenance: undefined, cleanup: 'MatchOrigin', where: 'resources[0].related.tls', sourceType: secrets, destinationType: secrets,
} as ResolvedRule;
const input = (tlsSecrets: unknown[]): ResolveInput => {
  const primary: KubeObject = { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name: 'orders' }, spec: { tlsSecrets } };
  const copy: KubeObject = { ...primary, metadata: { namespace: 'tenant-a-shop', name: 'orders' } };
  return { rule, primary, copy, platformCluster: 'tenant-a', serviceCluster: 'service', context: { cluster: 'tenant-a', namespace: 'shop', name: 'orders', object: primary } };
};

describe('resolving a tenant\'s references', () => {
  it('looks at one name past the limit of a wildcard over 100,000, and says there were more', () => {
    const names = Array.from({ length: 100_000 }, (_, i) => `s-${i}`);
    rewrites = 0;
    const resolved = resolveRelated(input(names), 501);
    assert.equal(resolved.pairs.length, 501);
    assert.equal(resolved.more, true);
    assert.equal(rewrites, 501, 'no name past the limit is rewritten');
    assert.equal(resolveRelated(input(names.slice(0, 10)), 501).more, undefined);
  });

  it('says at most a few problems, each quoting a short, escaped prefix of the value', () => {
    const long = `\u001b[31m${'x'.repeat(1_000_000)}`;
    rewrites = 0;
    const resolved = resolveRelated(input([long, 42, 42, 42, 42, 42, ...Array.from({ length: 400 }, (_, i) => `Not_A_Name_${i}`), 'ok']), 501);
    assert.deepEqual(resolved.pairs.map((p) => p.source.name), ['ok']);
    assert.equal(rewrites, 401, 'the 1 MB value never meets the rewrite\'s regex');
    assert.equal(resolved.problems.length, MAX_RULE_PROBLEMS + 1);
    assert.match(resolved.problems.at(-1)!, /396 more problem\(s\)/);
    const longest = Math.max(...resolved.problems.map((p) => p.length));
    assert.ok(longest < 300, `each problem is short (the longest: ${longest} characters)`);
    assert.ok(resolved.problems.every((p) => !p.includes('\u001b')), 'no raw escape character');
    assert.ok(resolved.problems.some((p) => p.includes('\\u001b[31mxxx') && p.includes('(1000005 characters)')), resolved.problems.join('\n'));
  });

  it('runs a rewrite in linear time on a name a tenant chose to make a backtracking engine take minutes', () => {
    const catastrophic: ResolvedRule = { ...rule, finder: { kind: 'reference', path: parseJsonPath('.spec.tlsSecrets[*]'), destinationPath: undefined, rewrite: { kind: 'regex', pattern: linearRegExp('^(\\w+\\s?)*$'), replacement: 'x' } } } as ResolvedRule;
    const name = `${'a'.repeat(120)}-b`;
    const started = performance.now();
    const resolved = resolveRelated({ ...input([name]), rule: catastrophic }, 501);
    assert.ok(performance.now() - started < 1000, `took ${performance.now() - started} ms`);
    assert.equal(resolved.pairs[0]?.destination.name, name, 'no match: the name as it is');
  });
});

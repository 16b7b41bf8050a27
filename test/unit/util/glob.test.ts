// `*`-only globs matched without a regex engine agree with the regex they stand for, on keys a
// tenant may write.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { globMatcher } from '../../../src/util/glob.js';

const asRegExp = (pattern: string) => new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\/]/g, '\\$&')).join('.*')}$`);

describe('globMatcher', () => {
  const patterns = ['kubernetes.io/*', '*.kubernetes.io/*', 'exact', '*', '**', 'a*b*c', '*ab*ab*', 'x*', '*x', 'a**b', '*.k8s.io/*'];
  const keys = ['kubernetes.io/name', 'node.kubernetes.io/x', 'a.b.kubernetes.io/', 'kubernetes.io', 'exact', 'exactly', '', 'abc', 'aXbYc', 'ac', 'abab', 'xabyab', 'ab', 'x', 'yx', 'ab', 'aab', 'sigs.k8s.io/y', '.k8s.io/', 'k8s.io/z'];
  it('agrees with the regex each pattern stands for', () => {
    for (const pattern of patterns) {
      const glob = globMatcher(pattern);
      const re = asRegExp(pattern);
      for (const key of keys) assert.equal(glob(key), re.test(key), `${pattern} on ${JSON.stringify(key)}`);
    }
  });
});

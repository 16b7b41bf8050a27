import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { buildSelector, labelKeyProblem, labelValueProblem, matchesSelector, selectorQuery } from '../../../src/core/label-selector.js';

describe('label-selector', () => {
  const { selector } = buildSelector({
    matchLabels: { app: 'db' },
    matchExpressions: [
      { key: 'tier', operator: 'In', values: ['gold', 'silver'] },
      { key: 'legacy', operator: 'DoesNotExist' },
      { key: 'env', operator: 'NotIn', values: ['dev'] },
      { key: 'owner', operator: 'Exists' },
    ],
  });

  it('matches like the API server', () => {
    assert.ok(selector);
    assert.ok(matchesSelector(selector, { app: 'db', tier: 'gold', owner: 'x' }));
    assert.ok(!matchesSelector(selector, { app: 'db', tier: 'bronze', owner: 'x' }));
    assert.ok(!matchesSelector(selector, { app: 'db', tier: 'gold', owner: 'x', legacy: 'y' }));
    assert.ok(!matchesSelector(selector, { app: 'db', tier: 'gold', owner: 'x', env: 'dev' }));
    assert.ok(!matchesSelector(selector, { app: 'db', tier: 'gold' }));
    assert.equal(selectorQuery(selector), 'app=db,tier in (gold,silver),!legacy,env notin (dev),owner');
  });

  it('reports invalid keys and values with their place', () => {
    const { problems } = buildSelector({ matchLabels: { 'bad key': 'v', ok: 'bad value!' }, matchExpressions: [{ key: 'x', operator: 'In' }] });
    assert.deepEqual(problems.map((p) => p.path), ['matchLabels.bad key', 'matchLabels.ok', 'matchExpressions[0].values']);
  });

  it('accepts every valid label value and rejects every value over 63 characters', () => {
    fc.assert(fc.property(fc.stringMatching(/^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/), (v) => assert.equal(labelValueProblem(v), undefined)));
    fc.assert(fc.property(fc.stringMatching(/^[a-z]{64,80}$/), (v) => assert.ok(labelValueProblem(v))));
    assert.ok(labelKeyProblem('example.com/name'.padStart(300, 'a')));
    assert.equal(labelKeyProblem('relsync.dev/agent'), undefined);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../src/core/object.js';
import {
  SYNC_PROBLEM_ANNOTATION,
  SYNCED_AT_ANNOTATION,
  SYNCED_CONDITION,
  SYNCED_GENERATION_ANNOTATION,
  SyncVerdicts,
  verdictCondition,
  withoutVerdictAnnotations,
  withoutVerdictCondition,
  withVerdictAnnotations,
  withVerdictCondition,
} from '../../../src/sync/sync-verdict.js';

const synced = { synced: true, reason: 'Synced', message: 'in sync' };
const conflict = { synced: false, reason: 'CopyConflict', message: 'taken' };
const operatorReady = { type: 'Ready', status: 'True', reason: 'Up', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' };

describe('sync verdict: the condition beside the operator\'s status', () => {
  it('adds the condition with observedGeneration, other status fields and conditions untouched, in their order', () => {
    const status = withVerdictCondition({ phase: 'Ready', conditions: [operatorReady] }, synced, 3, 'T1');
    assert.equal(status.phase, 'Ready');
    assert.deepEqual(status.conditions, [operatorReady, { type: SYNCED_CONDITION, status: 'True', observedGeneration: 3, lastTransitionTime: 'T1', reason: 'Synced', message: 'in sync' }]);
  });

  it('keeps the transition time while the condition\'s status stays, moves it when it flips', () => {
    const first = withVerdictCondition(undefined, conflict, 1, 'T1');
    const again = withVerdictCondition(first, { ...conflict, message: 'taken, still' }, 2, 'T2');
    assert.equal(verdictCondition(again)?.lastTransitionTime, 'T1');
    assert.equal(verdictCondition(again)?.observedGeneration, 2);
    const flipped = withVerdictCondition(again, synced, 2, 'T3');
    assert.equal(verdictCondition(flipped)?.lastTransitionTime, 'T3');
    assert.equal(verdictCondition(flipped)?.status, 'True');
  });

  it('an unchanged verdict is an unchanged status (no write loop)', () => {
    const once = withVerdictCondition({ conditions: [operatorReady] }, synced, 1, 'T1');
    assert.deepEqual(withVerdictCondition(once, synced, 1, 'T9'), once);
  });

  it('replaces the one in place and drops duplicates of its type', () => {
    const forged = { type: SYNCED_CONDITION, status: 'True', reason: 'Forged', message: '', lastTransitionTime: 'T0' };
    const status = withVerdictCondition({ conditions: [forged, operatorReady, forged] }, conflict, 1, 'T1');
    assert.deepEqual((status.conditions as Array<{ type: string }>).map((c) => c.type), [SYNCED_CONDITION, 'Ready']);
    assert.equal(verdictCondition(status)?.reason, 'CopyConflict');
  });

  it('a status that is not an object, or conditions that are not a list, are replaced, not crashed on', () => {
    assert.equal(verdictCondition(withVerdictCondition('weird', synced, 1, 'T1'))?.status, 'True');
    assert.equal(verdictCondition(withVerdictCondition({ conditions: 'weird' }, synced, 1, 'T1'))?.status, 'True');
  });

  it('caps a long message', () => {
    const status = withVerdictCondition(undefined, { ...conflict, message: 'x'.repeat(40_000) }, 1, 'T1');
    assert.equal(verdictCondition(status)?.message.length, 32_768);
  });

  it('takes only its own condition away', () => {
    const status = withVerdictCondition({ phase: 'Ready', conditions: [operatorReady] }, synced, 1, 'T1');
    assert.deepEqual(withoutVerdictCondition(status), { phase: 'Ready', conditions: [operatorReady] });
    assert.deepEqual(withoutVerdictCondition(withVerdictCondition({ phase: 'Ready' }, synced, 1, 'T1')), { phase: 'Ready' });
  });

  it('carries relsync\'s condition over a status copied back, and never takes the operator\'s one of the same type for it', () => {
    const verdicts = new SyncVerdicts({ clusters: { client: () => assert.fail('no write') }, logger: pino({ level: 'silent' }), write: () => assert.fail('no write') });
    const primary: KubeObject = { metadata: { name: 'db' }, status: withVerdictCondition({ phase: 'Pending' }, conflict, 1, 'T1') };
    const forged = { type: SYNCED_CONDITION, status: 'True', reason: 'Forged', message: '', lastTransitionTime: 'T0' };
    const carried = verdicts.carry(primary, { phase: 'Ready', conditions: [operatorReady, forged] }) as { conditions: Array<{ type: string; reason: string }> };
    assert.deepEqual(carried.conditions.map((c) => `${c.type}/${c.reason}`), ['Ready/Up', `${SYNCED_CONDITION}/CopyConflict`]);
    // A primary without relsync's condition gets none from the copy.
    assert.deepEqual(verdicts.carry({ metadata: { name: 'db' } }, { conditions: [forged] }), {});
  });
});

describe('sync verdict: annotations where the schema keeps no condition', () => {
  it('a complete sync records the generation and its time; the time stays while the generation does', () => {
    const first = withVerdictAnnotations({ team: 'shop' }, synced, 2, 'T1');
    assert.deepEqual(first, { team: 'shop', [SYNCED_GENERATION_ANNOTATION]: '2', [SYNCED_AT_ANNOTATION]: 'T1' });
    assert.deepEqual(withVerdictAnnotations(first, synced, 2, 'T2'), first);
    assert.equal(withVerdictAnnotations(first, synced, 3, 'T3')[SYNCED_AT_ANNOTATION], 'T3');
  });

  it('a problem is recorded beside the last complete sync, and goes when synced again', () => {
    const good = withVerdictAnnotations(undefined, synced, 1, 'T1');
    const bad = withVerdictAnnotations(good, conflict, 2, 'T2');
    assert.equal(bad[SYNC_PROBLEM_ANNOTATION], 'CopyConflict: taken');
    assert.equal(bad[SYNCED_GENERATION_ANNOTATION], '1', 'the last good sync stays');
    const again = withVerdictAnnotations(bad, synced, 2, 'T3');
    assert.equal(again[SYNC_PROBLEM_ANNOTATION], undefined);
    assert.equal(again[SYNCED_GENERATION_ANNOTATION], '2');
  });

  it('a tenant\'s forged value is replaced by the verdict, and removed on release with nothing else', () => {
    const forged = { [SYNCED_GENERATION_ANNOTATION]: '99', [SYNCED_AT_ANNOTATION]: 'forged', other: 'x' };
    assert.equal(withVerdictAnnotations(forged, synced, 1, 'T1')[SYNCED_GENERATION_ANNOTATION], '1');
    assert.deepEqual(withoutVerdictAnnotations(forged), { other: 'x' });
  });
});

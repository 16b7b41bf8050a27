import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { ApiError } from '../../../src/kube/api-error.js';
import type { ObjectClient } from '../../../src/cache/cluster-access.js';
import { SyncVerdicts, verdictCondition, withoutVerdictAnnotations, withoutVerdictCondition, withVerdictAnnotations, withVerdictCondition } from '../../../src/sync/sync-verdict.js';
import { clockReading } from '../../harness/fake-clock.js';
import { SYNCED_AT_ANNOTATION, SYNCED_CONDITION, SYNCED_GENERATION_ANNOTATION, SYNC_PROBLEM_ANNOTATION } from '../../../src/core/relsync-keys.js';

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

/**
 * A primary type's API as SyncVerdicts meets it: `behaviour` says what a status write does (kept,
 * pruned, no status subresource, refused for one object). Writes are counted per verb.
 */
function fakeType(behaviour: (name: string) => 'keeps' | 'prunes' | 'noSubresource' | 'refuses') {
  const objects = new Map<string, KubeObject>();
  const writes: string[] = [];
  /** What each status patch named: its precondition and the status members it set. */
  const patches: Array<{ resourceVersion: string | undefined; keys: string[] }> = [];
  let version = 1;
  const stored = (o: KubeObject) => {
    const copy = structuredClone({ ...o, metadata: { ...o.metadata, resourceVersion: String(++version) } });
    objects.set(o.metadata.name!, copy);
    return structuredClone(copy);
  };
  const client = {
    replace: async (o: KubeObject) => {
      writes.push(`replace ${o.metadata.name}`);
      return stored({ ...o, status: objects.get(o.metadata.name!)?.status });
    },
    replaceStatus: async (o: KubeObject) => {
      const name = o.metadata.name!;
      writes.push(`replaceStatus ${name}`);
      const mode = behaviour(name);
      if (mode === 'noSubresource') throw new ApiError('PUT', `/x/${name}/status`, 404, JSON.stringify({ kind: 'Status', reason: 'NotFound', message: 'the server could not find the requested resource', details: {} }));
      if (mode === 'refuses' && verdictCondition(o.status)) throw new ApiError('PUT', `/x/${name}/status`, 422, JSON.stringify({ kind: 'Status', reason: 'Invalid', message: 'status.conditions: Too many: 9: must have at most 8 items' }));
      const status = mode === 'prunes' ? withoutVerdictCondition(o.status) : o.status;
      return stored({ ...objects.get(name)!, status });
    },
    // The conditions' merge patch: the same behaviour, answered as metadata and status.
    patchStatus: async (_namespace: string, name: string, resourceVersion: string | undefined, patch: { conditions?: unknown }) => {
      writes.push(`patchStatus ${name}`);
      patches.push({ resourceVersion, keys: Object.keys(patch) });
      const current = objects.get(name)!;
      if (resourceVersion && resourceVersion !== current.metadata.resourceVersion) throw new ApiError('PATCH', `/x/${name}/status`, 409, JSON.stringify({ kind: 'Status', reason: 'Conflict', message: 'the object has been modified' }));
      const mode = behaviour(name);
      const merged = { ...(current.status ?? {}), ...patch };
      if (mode === 'noSubresource') throw new ApiError('PATCH', `/x/${name}/status`, 404, JSON.stringify({ kind: 'Status', reason: 'NotFound', message: 'the server could not find the requested resource', details: {} }));
      if (mode === 'refuses' && verdictCondition(merged)) throw new ApiError('PATCH', `/x/${name}/status`, 422, JSON.stringify({ kind: 'Status', reason: 'Invalid', message: 'status.conditions: Too many: 9: must have at most 8 items' }));
      const { apiVersion, kind, metadata, status } = stored({ ...current, status: mode === 'prunes' ? withoutVerdictCondition(merged) : merged }) as KubeObject;
      return { apiVersion, kind, metadata, status };
    },
  } as unknown as ObjectClient;
  const put = (name: string, extra: Partial<KubeObject> = {}) => stored({ metadata: { name, namespace: 'shop', generation: 1 }, ...extra });
  return { objects, writes, patches, client, put };
}

const type: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const idOf = (name: string): ObjectIdentity => ({ cluster: 'tenant-a', group: type.group, resource: type.resource, namespace: 'shop', name });

function verdictsOver(fake: ReturnType<typeof fakeType>, now = () => new Date('2026-12-05T10:00:00Z')) {
  return new SyncVerdicts({ clusters: { client: () => fake.client }, logger: pino({ level: 'silent' }), write: (_id, _p, write) => write(), clock: clockReading(() => now().getTime()) });
}

describe('sync verdict: which form, learnt from the API server', () => {
  it('a write refused for one object (422) shows that object\'s verdict as annotations; the type\'s other objects keep the condition, and none keeps a stale True', async () => {
    const fake = fakeType((name) => (name === 'b' ? 'refuses' : 'keeps'));
    const verdicts = verdictsOver(fake);
    let a = await verdicts.show(type, idOf('a'), fake.put('a'), synced);
    assert.equal(verdictCondition(a.status)?.status, 'True');
    const b = await verdicts.show(type, idOf('b'), fake.put('b'), conflict);
    assert.equal(b.metadata.annotations?.[SYNC_PROBLEM_ANNOTATION], 'CopyConflict: taken');
    a = await verdicts.show(type, idOf('a'), a, conflict);
    assert.equal(verdictCondition(a.status)?.status, 'False', 'A still shows the condition, now False');
    assert.equal(a.metadata.annotations?.[SYNC_PROBLEM_ANNOTATION], undefined);
  });

  it('an object that had the condition and then is refused loses its True: the annotations say the verdict, the condition goes', async () => {
    let refuse = false;
    const fake = fakeType(() => (refuse ? 'refuses' : 'keeps'));
    const verdicts = verdictsOver(fake);
    let a = await verdicts.show(type, idOf('a'), fake.put('a'), synced);
    refuse = true;
    a = await verdicts.show(type, idOf('a'), a, conflict);
    assert.equal(verdictCondition(a.status), undefined, 'no stale True left');
    assert.equal(a.metadata.annotations?.[SYNC_PROBLEM_ANNOTATION], 'CopyConflict: taken');
  });

  it('a schema that prunes the condition, or no status subresource, switches the type: later objects are not tried again', async () => {
    for (const behaviour of ['prunes', 'noSubresource'] as const) {
      const fake = fakeType(() => behaviour);
      const verdicts = verdictsOver(fake);
      const a = await verdicts.show(type, idOf('a'), fake.put('a'), synced);
      assert.equal(a.metadata.annotations?.[SYNCED_GENERATION_ANNOTATION], '1', behaviour);
      fake.writes.length = 0;
      await verdicts.show(type, idOf('b'), fake.put('b'), synced);
      assert.deepEqual(fake.writes, ['replace b'], `${behaviour}: straight to annotations`);
    }
  });

  it('the condition goes as a patch of the conditions alone, at the version read: a stale read is a 409, and the rest of the status stays', async () => {
    const fake = fakeType(() => 'keeps');
    const verdicts = verdictsOver(fake);
    const read = fake.put('a', { status: { phase: 'Ready', conditions: [{ type: 'Operator', status: 'True' }] } });
    const shown = await verdicts.show(type, idOf('a'), read, synced);
    assert.deepEqual(fake.patches, [{ resourceVersion: read.metadata.resourceVersion, keys: ['conditions'] }]);
    assert.equal((shown.status as { phase?: string }).phase, 'Ready');
    assert.deepEqual((shown.status as { conditions: Array<{ type: string }> }).conditions.map((c) => c.type), ['Operator', 'relsync.dev/Synced']);
    assert.equal(shown.metadata.resourceVersion, fake.objects.get('a')!.metadata.resourceVersion, 'the primary as written');
    // Read before someone else's write: the API server refuses it, and the reconcile reads again.
    await assert.rejects(verdicts.show(type, idOf('a'), read, conflict), /409/);
  });

  it('a 404 that names the object (it is gone) switches nothing and is not the reconcile\'s failure; a 409 is', async () => {
    const fake = fakeType(() => 'keeps');
    const gone = { ...fake.client, patchStatus: async () => { throw new ApiError('PATCH', '/x/a/status', 404, JSON.stringify({ kind: 'Status', reason: 'NotFound', message: 'databases "a" not found', details: { name: 'a' } })); } } as unknown as ObjectClient;
    const verdicts = new SyncVerdicts({ clusters: { client: () => gone }, logger: pino({ level: 'silent' }), write: (_id, _p, write) => write() });
    const a = fake.put('a');
    assert.equal(await verdicts.show(type, idOf('a'), a, synced), a);
    const conflicted = { ...fake.client, patchStatus: async () => { throw new ApiError('PATCH', '/x/a/status', 409, JSON.stringify({ kind: 'Status', reason: 'Conflict', message: 'the object has been modified' })); } } as unknown as ObjectClient;
    const again = new SyncVerdicts({ clusters: { client: () => conflicted }, logger: pino({ level: 'silent' }), write: (_id, _p, write) => write() });
    await assert.rejects(again.show(type, idOf('a'), a, synced), /409/);
  });

  it('a change of the message alone waits 10 minutes; a change of status, reason or generation is written at once', async () => {
    let now = new Date('2026-12-05T10:00:00Z');
    const fake = fakeType(() => 'keeps');
    const verdicts = verdictsOver(fake, () => now);
    let a = await verdicts.show(type, idOf('a'), fake.put('a'), { ...conflict, message: 'request 1' });
    fake.writes.length = 0;
    a = await verdicts.show(type, idOf('a'), a, { ...conflict, message: 'request 2' });
    assert.deepEqual(fake.writes, [], 'the message alone changed');
    a = await verdicts.show(type, idOf('a'), a, { ...conflict, reason: 'CopySyncFailed', message: 'request 3' });
    assert.deepEqual(fake.writes, ['patchStatus a'], 'the reason changed');
    now = new Date(now.getTime() + 10 * 60_000 + 1);
    fake.writes.length = 0;
    a = await verdicts.show(type, idOf('a'), a, { ...conflict, reason: 'CopySyncFailed', message: 'request 4' });
    assert.equal(verdictCondition(a.status)?.message, 'request 4');
  });

  it('leftover annotations of an earlier form go once the condition is kept', async () => {
    const fake = fakeType(() => 'keeps');
    const verdicts = verdictsOver(fake);
    const a = await verdicts.show(type, idOf('a'), fake.put('a', { metadata: { name: 'a', namespace: 'shop', generation: 1, annotations: { [SYNC_PROBLEM_ANNOTATION]: 'CopyConflict: old', keep: 'me' } } }), synced);
    assert.deepEqual(a.metadata.annotations, { keep: 'me' });
    assert.equal(verdictCondition(a.status)?.status, 'True');
  });

  it('a condition of relsync\'s type in another case (kubectl wait matches without case) is taken for relsync\'s: replaced, never left to answer the wait', () => {
    const status = withVerdictCondition({ conditions: [{ type: 'relsync.dev/synced', status: 'True', reason: 'Forged', message: '', lastTransitionTime: 'T0' }] }, conflict, 1, 'T1');
    assert.deepEqual((status.conditions as Array<{ type: string; status: string }>).map((c) => `${c.type}=${c.status}`), [`${SYNCED_CONDITION}=False`]);
  });
});

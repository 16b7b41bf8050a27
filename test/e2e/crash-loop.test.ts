// Crashes under load: relsync SIGKILLed at random moments while two tenants
// change (or one of three replicas over six tenants), then checked against
// the live clusters (chaos/crash-loop.ts; the long version is
// `npm run chaos -- --kills K [--replicas N]`).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runCrashLoop, summaryLine } from '../../chaos/crash-loop.js';

describe('crash loop', () => {
  it('loses nothing, leaves no orphans and crosses no tenant across SIGKILLs under load', async () => {
    const seed = Number(process.env.RELSYNC_CHAOS_SEED ?? Date.now() % 100_000);
    const result = await runCrashLoop({ kills: 4, seed, killAfterMs: [300, 4000], convergeTimeoutMs: 120_000, log: (l) => console.log(`chaos: ${l}`) });
    console.log(summaryLine(result));
    assert.deepEqual(result.problems, [], `seed ${seed}`);
    assert.equal(result.integrity, 'ok');
    assert.equal(result.integrityChecks, 5, 'the store was checked after every kill and at the end');
    assert.ok(result.changes > 50, `the writer made ${result.changes} changes`);
  });

  it('loses nothing with three replicas over six tenants, SIGKILLed at random, and no replica writes for a shard it does not hold', async () => {
    const seed = Number(process.env.RELSYNC_CHAOS_SEED ?? Date.now() % 100_000);
    const result = await runCrashLoop({ kills: 4, replicas: 3, seed, killAfterMs: [500, 5000], convergeTimeoutMs: 180_000, log: (l) => console.log(`chaos: ${l}`) });
    console.log(summaryLine(result));
    assert.deepEqual(result.problems, [], `seed ${seed}`);
    assert.equal(result.integrity, 'ok');
    assert.ok(result.writesChecked > 100, `the copies' writes were checked against who held their shard (${result.writesChecked})`);
    assert.ok(result.changes > 100, `the writer made ${result.changes} changes`);
  });
});

/**
 * `npm run chaos -- --kills K [--replicas N] [--tenants T] [--store-loss] [--seed S] [--min-ms A] [--max-ms B]`
 *
 * The long crash loop (see crash-loop.ts): K SIGKILLs at random moments
 * while a writer changes the tenants (two; six with replicas), then a
 * convergence check. With `--replicas N`, N relsync processes share the
 * tenants over as many shards, and each kill is of one of them. With
 * `--store-loss`, each kill also deletes the victim's store or replaces it with
 * an older copy of itself, at random; anchors (a primary per tenant whose
 * related objects change but are never deleted) must keep their copies' uids
 * throughout (wronglyDeleted). Prints the
 * figures and ends with one line
 * `[replicas=N writesChecked=W ][storeLoss=yes ]kills=K changes=N lost=L orphans=O wronglyDeleted=D crossTenant=X integrity=ok convergeMs=T`;
 * exits 1 when anything was lost, orphaned, crossed tenants, the store
 * disagrees with the live relationships, or (replicas) a shard was not held
 * exactly once at the end or a replica wrote for a shard it did not hold.
 */
import { parseArgs } from 'node:util';
import { runCrashLoop, summaryLine } from './crash-loop.js';

const { values: args } = parseArgs({
  options: {
    kills: { type: 'string', default: '20' },
    seed: { type: 'string' },
    'min-ms': { type: 'string', default: '500' },
    'max-ms': { type: 'string', default: '6000' },
    'converge-timeout-ms': { type: 'string', default: '180000' },
    replicas: { type: 'string', default: '1' },
    tenants: { type: 'string' },
    'store-loss': { type: 'boolean', default: false },
  },
});
const seed = args.seed !== undefined ? Number(args.seed) : Math.floor(Math.random() * 2 ** 31);
const started = Date.now();
console.log(`chaos: ${args.kills} kills of ${args.replicas} replica(s)${args['store-loss'] ? ', each losing or aging its store' : ''}, seed ${seed} (pass --seed ${seed} to repeat the same choices)`);
const result = await runCrashLoop({
  kills: Number(args.kills),
  seed,
  killAfterMs: [Number(args['min-ms']), Number(args['max-ms'])],
  convergeTimeoutMs: Number(args['converge-timeout-ms']),
  replicas: Number(args.replicas),
  ...(args.tenants !== undefined ? { tenants: Number(args.tenants) } : {}),
  storeLoss: args['store-loss'],
  log: (line) => console.log(`chaos: ${line}`),
});
for (const p of result.problems) console.log(`chaos: ${p}`);
console.log(`chaos: store integrity checked ${result.integrityChecks} times (${result.integrity}); store rows that differ from the live relationships: ${result.storeMismatches}; run took ${Math.round((Date.now() - started) / 1000)} s`);
console.log(summaryLine(result));
process.exit(result.problems.length === 0 && result.integrity === 'ok' ? 0 : 1);

/**
 * `npm run chaos -- --kills K [--replicas N] [--tenants T] [--seed S] [--min-ms A] [--max-ms B]`
 *
 * The long crash loop (see crash-loop.ts): K SIGKILLs at random moments
 * while a writer changes the tenants (two; six with replicas), then a
 * convergence check. With `--replicas N`, N relsync processes share the
 * tenants over as many shards, and each kill is of one of them. Prints the
 * figures and ends with one line
 * `[replicas=N writesChecked=W ]kills=K changes=N lost=L orphans=O crossTenant=X integrity=ok convergeMs=T`;
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
  },
});
const seed = args.seed !== undefined ? Number(args.seed) : Math.floor(Math.random() * 2 ** 31);
const started = Date.now();
console.log(`chaos: ${args.kills} kills of ${args.replicas} replica(s), seed ${seed} (pass --seed ${seed} to repeat the same choices)`);
const result = await runCrashLoop({
  kills: Number(args.kills),
  seed,
  killAfterMs: [Number(args['min-ms']), Number(args['max-ms'])],
  convergeTimeoutMs: Number(args['converge-timeout-ms']),
  replicas: Number(args.replicas),
  ...(args.tenants !== undefined ? { tenants: Number(args.tenants) } : {}),
  log: (line) => console.log(`chaos: ${line}`),
});
for (const p of result.problems) console.log(`chaos: ${p}`);
console.log(`chaos: store integrity checked ${result.integrityChecks} times (${result.integrity}); store rows that differ from the live relationships: ${result.storeMismatches}; run took ${Math.round((Date.now() - started) / 1000)} s`);
console.log(summaryLine(result));
process.exit(result.problems.length === 0 && result.integrity === 'ok' ? 0 : 1);

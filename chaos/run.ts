/**
 * `npm run chaos -- --kills K [--seed S] [--min-ms A] [--max-ms B]`
 *
 * The long crash loop (see crash-loop.ts): K SIGKILLs at random moments
 * while a writer changes two tenants, then a convergence check. Prints the
 * figures and ends with one line
 * `kills=K changes=N lost=L orphans=O crossTenant=X integrity=ok convergeMs=T`;
 * exits 1 when anything was lost, orphaned, crossed tenants, or the store
 * disagrees with the live relationships.
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
  },
});
const seed = args.seed !== undefined ? Number(args.seed) : Math.floor(Math.random() * 2 ** 31);
const started = Date.now();
console.log(`chaos: ${args.kills} kills, seed ${seed} (pass --seed ${seed} to repeat the same choices)`);
const result = await runCrashLoop({
  kills: Number(args.kills),
  seed,
  killAfterMs: [Number(args['min-ms']), Number(args['max-ms'])],
  convergeTimeoutMs: Number(args['converge-timeout-ms']),
  log: (line) => console.log(`chaos: ${line}`),
});
for (const p of result.problems) console.log(`chaos: ${p}`);
console.log(`chaos: store integrity checked ${result.integrityChecks} times (${result.integrity}); store rows that differ from the live relationships: ${result.storeMismatches}; run took ${Math.round((Date.now() - started) / 1000)} s`);
console.log(summaryLine(result));
process.exit(result.problems.length === 0 && result.integrity === 'ok' ? 0 : 1);

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LevelWithSilent, Logger } from 'pino';
import type { Config } from '../config/config.js';
import { DryRunLedger } from '../kube/dry-run-client.js';
import { printChanges, viewOf } from './change-diff.js';
import { loadConfigOrExit } from './load-config-or-exit.js';
import { Manager } from '../controller/manager.js';
import { openStore } from '../store/database.js';
import { ResolveError } from '../sync/resolved-config.js';
import { createLogger, type LogFormat } from '../util/logger.js';

/** `relsync sweep`: one full-resync sweep, a summary, exit 0 (1 when a primary failed). */
export async function sweepCommand(options: { config: string; logLevel: LevelWithSilent; logFormat: LogFormat; output: 'text' | 'json'; force?: boolean; dryRun?: boolean }): Promise<void> {
  // Logs to stderr: stdout is the summary (JSON with -o json).
  const logger = createLogger(options.logLevel, true, options.logFormat);
  const config = loadConfigOrExit(options.config);
  if (options.dryRun) return dryRunSweep(config, logger, options.output, options.config);
  const store = await openStore(config.storePath).catch((err: Error) => {
    console.error(err.message);
    process.exit(1);
  });
  try {
    const result = await new Manager({ config, store, logger }).sweepOnce({ force: options.force ?? false });
    if (options.output === 'json') console.log(JSON.stringify(result));
    else {
      console.log(
        `sweep ${result.id} ${result.status} in ${result.durationMs} ms: ${result.primariesSeen} primaries seen, ${result.objectsListed} objects listed, ` +
          `relations +${result.relationsAdded}/-${result.relationsRemoved}, copies repaired ${result.copiesRepaired}, removed ${result.copiesRemoved}, errors ${result.errors}`,
      );
    }
    await store.close();
    process.exit(result.status === 'done' && result.errors === 0 ? 0 : 1);
  } catch (err) {
    await store.close();
    if (err instanceof ResolveError) {
      console.error(`${options.config}: ${err.message}`);
      process.exit(2);
    }
    console.error(`sweep failed: ${(err as Error).message}`);
    process.exit(1);
  }
}

/**
 * `relsync sweep --dry-run`: the sweep on a copy of the store, against API servers that are only
 * read (kube/dry-run-client.ts); prints what it would create, update and delete. Safe beside a
 * running leader: the leader's store is only read (SQLite's online backup), and nothing is written.
 */
async function dryRunSweep(config: Config, logger: Logger, output: 'text' | 'json', configPath: string): Promise<void> {
  if (!existsSync(config.storePath)) {
    // Against an empty store every copy would read as an orphan: run it where the leader's store is.
    console.error(`store ${config.storePath} does not exist: run the dry run where relsync's store is (the leader's container)`);
    process.exit(2);
  }
  const dir = mkdtempSync(join(tmpdir(), 'relsync-dry-run-'));
  const copy = join(dir, 'store.db');
  let code = 1;
  try {
    const original = await openStore(config.storePath, { readonly: true });
    try {
      // In one step: a backup in pages restarts at every commit of a running leader, and might never end.
      await original.sqlite.backup(copy, { progress: () => 0x7fffffff });
    } finally {
      await original.close();
    }
    const store = await openStore(copy);
    const ledger = new DryRunLedger();
    let result;
    try {
      result = await new Manager({ config: { ...config, storePath: copy }, store, logger }).sweepOnce({ dryRun: ledger });
    } finally {
      await store.close();
    }
    const views = ledger.list().map(viewOf);
    if (output === 'json') console.log(JSON.stringify({ changes: views, sweep: result }, null, 2));
    else printChanges(views);
    code = result.status === 'done' && result.errors === 0 ? 0 : 1;
  } catch (err) {
    if (err instanceof ResolveError) {
      console.error(`${configPath}: ${err.message}`);
      code = 2;
    } else console.error(`dry run failed: ${(err as Error).message}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.exit(code);
}

import type { LevelWithSilent } from 'pino';
import { loadConfigOrExit } from './load-config-or-exit.js';
import { Manager } from '../controller/manager.js';
import { openStore } from '../store/database.js';
import { ResolveError } from '../sync/resolved-config.js';
import { createLogger, type LogFormat } from '../util/logger.js';

/** `relsync sweep`: one full-resync sweep, a summary, exit 0 (1 when a primary failed). */
export async function sweepCommand(options: { config: string; logLevel: LevelWithSilent; logFormat: LogFormat; output: 'text' | 'json'; force?: boolean }): Promise<void> {
  // Logs to stderr: stdout is the summary (JSON with -o json).
  const logger = createLogger(options.logLevel, true, options.logFormat);
  const config = loadConfigOrExit(options.config);
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

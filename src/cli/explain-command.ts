/** `relsync explain TYPE [NAMESPACE/]NAME`: the config's, the store's and the API servers' view of one object, and why. */
import { existsSync } from 'node:fs';
import { explainWithConfig, type Explanation } from '../controller/explain.js';
import { openStore } from '../store/database.js';
import { createLogger } from '../util/logger.js';
import { printable } from './printable.js';
import { parseQuery } from './inspect-command.js';
import { loadConfigOrExit } from './load-config-or-exit.js';

export interface ExplainOptions {
  readonly config: string;
  readonly cluster?: string;
  readonly output: 'text' | 'json';
}

export async function explainCommand(type: string, object: string, options: ExplainOptions): Promise<void> {
  const config = loadConfigOrExit(options.config);
  if (!existsSync(config.storePath)) {
    console.error(`store ${config.storePath} does not exist: relsync has not run with this config here`);
    process.exit(2);
  }
  const store = await openStore(config.storePath, { readonly: true });
  let explanation: Explanation;
  try {
    explanation = await explainWithConfig(config, store.db, createLogger('warn', true), parseQuery(type, object, options.cluster));
  } catch (err) {
    console.error(`cannot explain ${type} ${object}: ${(err as Error).message}`);
    process.exit(1);
  } finally {
    await store.close();
  }
  if (options.output === 'json') {
    console.log(JSON.stringify(explanation, null, 2));
    return;
  }
  const { object: what, concerns, store: rows, apiServer, why } = explanation;
  // Tenants' names, messages and annotations are printed: control characters as escapes.
  const say = (line: string) => console.log(printable(line));
  say(what);
  say(`why: ${why}`);
  say('config:');
  for (const c of concerns.length > 0 ? concerns : ['nothing']) say(`  ${c}`);
  say('store:');
  for (const r of rows.length > 0 ? rows : ['nothing']) say(`  ${r}`);
  for (const { cluster, lines } of apiServer) {
    say(`API server ${cluster}:`);
    for (const l of lines) say(`  ${l}`);
  }
}

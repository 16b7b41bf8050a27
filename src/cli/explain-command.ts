/**
 * `relsync explain TYPE [NAMESPACE/]NAME`: the config's, the store's and the API servers' view of
 * one object, and why; read here (--config) or asked of a running relsync's leader (--server).
 */
import { existsSync, readFileSync } from 'node:fs';
import { explainQuery, explainWithConfig, type Explanation } from '../controller/explain.js';
import { openStore } from '../store/database.js';
import { createLogger } from '../util/logger.js';
import { printable } from './printable.js';
import { httpGet } from './http-get.js';
import { loadConfigOrExit } from './load-config-or-exit.js';
import { systemClock } from '../util/clock.js';

export interface ExplainOptions {
  readonly config?: string;
  readonly cluster?: string;
  readonly output: 'text' | 'json';
  /** A running relsync's HTTP address: ask its leader instead of reading the store and the clusters here. */
  readonly server?: string;
  /** A file with the bearer token for --server (default: $RELSYNC_TOKEN). */
  readonly tokenFile?: string;
  /** PEM certificate(s) to trust for an https --server (default: the system's). */
  readonly certificateAuthority?: string;
}

export async function explainCommand(type: string, object: string, options: ExplainOptions): Promise<void> {
  if (options.server) return print(await askServer(options.server, type, object, options), options.output);
  if (!options.config) {
    console.error('give --config (read the store and the clusters here) or --server (ask a running relsync)');
    process.exit(2);
  }
  const config = loadConfigOrExit(options.config);
  if (!existsSync(config.storePath)) {
    console.error(`store ${config.storePath} does not exist: relsync has not run with this config here`);
    process.exit(2);
  }
  const query = explainQuery(type, object, options.cluster);
  if (typeof query === 'string') {
    console.error(query);
    process.exit(2);
  }
  const store = await openStore(config.storePath, { readonly: true });
  let explanation: Explanation;
  try {
    explanation = await explainWithConfig(config, store.db, createLogger('warn', true), query);
  } catch (err) {
    console.error(`cannot explain ${type} ${object}: ${(err as Error).message}`);
    process.exit(1);
  } finally {
    await store.close();
  }
  print(explanation, options.output);
}

/** GET <server>/explain, with the token: the same Explanation, from the leader. */
async function askServer(server: string, type: string, object: string, options: ExplainOptions): Promise<Explanation> {
  if (options.config) console.error('--config is not read with --server: the server answers from its own');
  let token = process.env.RELSYNC_TOKEN;
  if (options.tokenFile) {
    try {
      token = readFileSync(options.tokenFile, 'utf8').trim();
    } catch (err) {
      console.error(`cannot read the token file: ${(err as Error).message}`);
      process.exit(2);
    }
  }
  let ca: Buffer | undefined;
  if (options.certificateAuthority) {
    try {
      ca = readFileSync(options.certificateAuthority);
    } catch (err) {
      console.error(`cannot read --certificate-authority ${options.certificateAuthority}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      process.exit(2);
    }
  }
  let url: URL;
  try {
    url = new URL(`${server.replace(/\/+$/, '')}/explain`);
  } catch {
    console.error(`--server ${printable(server)} is not a URL (e.g. https://relsync-metrics.relsync-system:8080)`);
    process.exit(2);
  }
  url.searchParams.set('type', type);
  url.searchParams.set('object', object);
  if (options.cluster) url.searchParams.set('cluster', options.cluster);
  // A Service in front of several replicas may send the request to a standby (503): asked again, on a new connection.
  for (let attempt = 1; ; attempt++) {
    let res: { status: number; text: string };
    try {
      res = await httpGet(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, ...(ca ? { ca } : {}), timeoutMs: 60_000, maxBytes: 64 * 1024 * 1024 });
    } catch (err) {
      console.error(`cannot reach ${server}: ${(err as Error).message}`);
      process.exit(1);
    }
    const { text } = res;
    if (res.status === 503 && attempt < 6) {
      // A wait that keeps the process alive (sleep(), not after()): nothing else is pending.
      await systemClock.sleep(500 * attempt, new AbortController().signal);
      continue;
    }
    if (res.status !== 200) {
      console.error(`${server} answered ${res.status}: ${printable(text.trim())}`);
      process.exit(1);
    }
    try {
      const answer = JSON.parse(text) as Explanation;
      if (typeof answer.why === 'string' && Array.isArray(answer.apiServer)) return answer;
    } catch {
      // said below
    }
    console.error(`${server} did not answer as relsync does (${text.length} bytes)`);
    process.exit(1);
  }
}

function print(explanation: Explanation, output: 'text' | 'json'): void {
  if (output === 'json') {
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

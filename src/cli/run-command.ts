import type { LevelWithSilent } from 'pino';
import { loadConfigOrExit } from './load-config-or-exit.js';
import { Manager } from '../controller/manager.js';
import { openStore } from '../store/database.js';
import { acquireReplicaLock } from '../store/replica-lock.js';
import { ResolveError } from '../sync/resolved-config.js';
import { createLogger, type LogFormat } from '../util/logger.js';
import { readCertificatePair, type CertificateFiles } from '../server/certificate-watcher.js';
import { systemClock } from '../util/clock.js';

export interface RunOptions {
  readonly config: string;
  readonly logLevel: LevelWithSilent;
  readonly logFormat: LogFormat;
  readonly httpPort: number;
  readonly http: boolean;
  readonly shutdownTimeout: number;
  readonly metricsAuth: 'none' | 'kubernetes';
  readonly metricsAuthCacheTtl: number;
  readonly explainAudience: string;
  readonly tlsCertFile?: string;
  readonly tlsPrivateKeyFile?: string;
}

export async function runCommand(options: RunOptions): Promise<void> {
  const logger = createLogger(options.logLevel, false, options.logFormat);
  const tls = tlsOrExit(options);
  const config = loadConfigOrExit(options.config);
  for (const notice of config.notices ?? []) logger[notice.level]({ where: notice.path }, notice.message);
  let store;
  let replica;
  try {
    // The replica lock first: a second process on this store must not touch it at all.
    replica = acquireReplicaLock(config.storePath);
    store = await openStore(config.storePath);
  } catch (err) {
    logger.fatal({ err: (err as Error).message }, 'cannot open the store; nothing was started');
    replica?.release();
    process.exit(1);
  }
  const controller = new AbortController();
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, timeoutSeconds: options.shutdownTimeout }, 'shutting down: no new work, waiting for in-flight reconciles');
    controller.abort();
    systemClock.after(options.shutdownTimeout * 1000, () => {
      logger.error('in-flight work did not finish within the shutdown timeout; exiting anyway');
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  const manager = new Manager({
    config,
    store,
    logger,
    identity: replica.identity,
    httpPort: options.http ? options.httpPort : undefined,
    metricsAuth: options.metricsAuth,
    metricsAuthTtlMs: options.metricsAuthCacheTtl * 1000,
    explainAudience: options.explainAudience,
    ...(tls ? { tls } : {}),
  });
  try {
    await manager.start(controller.signal);
  } catch (err) {
    if (err instanceof ResolveError) {
      logger.fatal({ err: err.message }, 'a configured type is not served by the API server');
      console.error(`${options.config}: ${err.message}`);
      await store.close();
      process.exit(2);
    }
    logger.fatal({ err: (err as Error).message }, 'relsync failed');
    await store.close();
    process.exit(1);
  }
  await store.close();
  replica.release();
  logger.flush();
}

/** The TLS files, both or neither, checked before anything starts: a bad one is exit 2 naming it. */
function tlsOrExit(options: RunOptions): CertificateFiles | undefined {
  const { tlsCertFile: certFile, tlsPrivateKeyFile: keyFile } = options;
  if (certFile === undefined && keyFile === undefined) return undefined;
  if (certFile === undefined || keyFile === undefined) {
    console.error('--tls-cert-file and --tls-private-key-file go together: give both, or neither for plain HTTP');
    process.exit(2);
  }
  try {
    readCertificatePair({ certFile, keyFile });
  } catch (err) {
    console.error((err as Error).message);
    process.exit(2);
  }
  return { certFile, keyFile };
}

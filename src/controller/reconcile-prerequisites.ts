/**
 * What must be in place before the first reconcile of a term or of a one-shot
 * sweep: the copy namespaces' pins and records, and the content-hash key.
 * Both wait (retrying) rather than let a reconcile run without them, since
 * a term without its pins would move copies and one without the key cannot
 * hash; only a refusal to run ends the process.
 */
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { RefusedToRunError } from '../sync/copy-namespaces.js';
import { secretType } from '../sync/content-hasher.js';
import type { Wiring } from './wiring.js';
import { Backoff } from '../util/backoff.js';
import type { Clock } from '../util/clock.js';

export interface PrerequisiteOptions {
  readonly config: Pick<Config, 'agentName' | 'leaderElection'>;
  readonly logger: Logger;
  /** Whether this process knows which installation it is (Manager.knowsInstallation). */
  readonly knowsInstallation: () => boolean;
  /** What the retries wait on. */
  readonly clock: Clock;
}

type Parts = Pick<Wiring, 'copyNamespaces' | 'resources' | 'hasher' | 'clusters'>;

/** The copy namespaces adopted, then the content-hash key loaded; returns early when `signal` aborts. */
export async function prepareReconciles(w: Parts, options: PrerequisiteOptions, signal: AbortSignal): Promise<void> {
  await adoptCopyNamespaces(w, options, signal);
  await loadHashKey(w, options, signal);
}

/**
 * The copy namespaces' pins and records before any reconcile. A refusal (another installation,
 * missing RBAC) ends the process; anything else (an API server that does not answer) is retried:
 * a term without its pins would move copies.
 */
async function adoptCopyNamespaces(w: Parts, options: PrerequisiteOptions, signal: AbortSignal): Promise<void> {
  const backoff = new Backoff({ initialMs: 1000, maxMs: 30_000 });
  while (!signal.aborted) {
    try {
      return await w.copyNamespaces.adoptUnrecorded(w.resources, signal);
    } catch (err) {
      if (err instanceof RefusedToRunError || signal.aborted) throw err;
      const retryInMs = backoff.next();
      options.logger.warn({ err: (err as Error).message, retryInMs }, 'could not read the copy namespaces\' records; no reconcile runs until it can');
      await options.clock.sleep(retryInMs, signal);
    }
  }
}

/** The content-hash key, retried like the adoption (a term cannot hash without it). */
async function loadHashKey(w: Parts, options: PrerequisiteOptions, signal: AbortSignal): Promise<void> {
  const { config, logger } = options;
  const le = config.leaderElection;
  const backoff = new Backoff({ initialMs: 1000, maxMs: 30_000 });
  while (!signal.aborted) {
    try {
      return await w.hasher.load(w.clusters.client(w.clusters.service.name, secretType), { namespace: le.namespace, agentName: config.agentName, mayCreate: options.knowsInstallation() }, logger);
    } catch (err) {
      const retryInMs = backoff.next();
      logger.error({ err: (err as Error).message, retryInMs }, 'cannot read the content-hash key; no reconcile runs until it can');
      await options.clock.sleep(retryInMs, signal);
    }
  }
}

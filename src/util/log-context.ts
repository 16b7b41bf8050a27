/**
 * What every log line of one unit of work carries without each call passing it: the reconcile's
 * id, so that the lines of one reconcile (the reconciler's, the writer's, the Event recorder's)
 * can be told apart from those of the reconciles running beside it. Kept in an AsyncLocalStorage;
 * the logger reads it on each line (logger.ts, pino's mixin).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';

export interface LogContext {
  readonly reconcile: string;
}

const storage = new AsyncLocalStorage<LogContext>();

/** Runs `work` as one reconcile: its log lines carry a fresh id. */
export function asReconcile<R>(work: () => Promise<R>): Promise<R> {
  return storage.run({ reconcile: randomBytes(8).toString('hex') }, work);
}

/** The fields of the work in progress, for each log line (none outside a reconcile). */
export function logContext(): LogContext | Record<string, never> {
  return storage.getStore() ?? {};
}

/** Runs `work` outside any reconcile (background work one reconcile started for all): its lines carry no id. */
export function outsideReconcile<R>(work: () => R): R {
  return storage.exit(work);
}

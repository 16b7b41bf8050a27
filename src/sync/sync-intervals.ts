/**
 * The sync layer's fixed intervals, each with why it is that long. None is a
 * config field: they are not in config/schema.ts, and nothing in a config
 * changes them (tests may pass their own `conflictRetryMs`).
 */

/**
 * How soon a relation or primary that waits on something outside relsync is looked at again: an
 * object in its copy's place, a namespace or a claim not there yet, a state the store cannot
 * tell. What a watch shows (the object in the way deleted) queues it at once; this is for what no
 * watch shows (RBAC granted, a workspace accepting a claim), so that a fix is seen within half a
 * minute. A fixed requeue, not a backoff: each primary with a standing conflict costs a
 * reconcile per interval (1,000 of them about 33 a second). docs/architecture.md states it
 * ("retried every 30 s", "Copies, marks and conflicts").
 */
export const CONFLICT_RETRY_MS = 30_000;

/**
 * How often one warning about one place and reason is logged again (a refused copy's place, an
 * object not adopted, an Event or a verdict not written). What it warns of is retried every
 * CONFLICT_RETRY_MS and at every sweep, so without it one standing problem would log a line per
 * retry; ten minutes is one line per default sweep interval (`resync.schedule`, every 10
 * minutes), still there in any log window an operator reads. docs/architecture.md states it ("once
 * per place and reason in ten minutes", "Copies, marks and conflicts").
 */
export const WARNING_REPEAT_MS = 10 * 60_000;

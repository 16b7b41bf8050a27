-- relsync store, schema 3: the work queue that survives a crash, and sweep history.

-- Primaries routed to the work queue and not reconciled yet. Written in the
-- same batched transaction as the watch checkpoints, so that a checkpoint
-- never moves past an event whose work could be lost in a crash; reloaded
-- into the queue at start.
CREATE TABLE pending_primaries (
  cluster     TEXT NOT NULL,
  "group"     TEXT NOT NULL,
  resource    TEXT NOT NULL,
  namespace   TEXT NOT NULL,
  name        TEXT NOT NULL,
  queued_at   TEXT NOT NULL,
  PRIMARY KEY (cluster, "group", resource, namespace, name)
) WITHOUT ROWID;

-- One row per full-resync sweep (scheduled, at start, or `relsync sweep`).
CREATE TABLE sweeps (
  id                 INTEGER PRIMARY KEY AUTOINCREMENT,
  trigger            TEXT NOT NULL,     -- startup | schedule | cli
  status             TEXT NOT NULL,     -- running | done | failed | skipped
  started_at         TEXT NOT NULL,
  finished_at        TEXT,
  primaries_seen     INTEGER NOT NULL DEFAULT 0,
  objects_listed     INTEGER NOT NULL DEFAULT 0,
  relations_added    INTEGER NOT NULL DEFAULT 0,
  relations_removed  INTEGER NOT NULL DEFAULT 0,
  copies_repaired    INTEGER NOT NULL DEFAULT 0,
  copies_removed     INTEGER NOT NULL DEFAULT 0,
  errors             INTEGER NOT NULL DEFAULT 0,
  message            TEXT
);

CREATE VIEW sweeps_view AS
SELECT id, trigger, status, started_at,
       CAST(round((julianday(finished_at) - julianday(started_at)) * 86400000) AS INTEGER) AS duration_ms,
       primaries_seen, objects_listed, relations_added, relations_removed, copies_repaired, copies_removed, errors, message
FROM sweeps
ORDER BY id DESC;

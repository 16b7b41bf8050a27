-- relsync store, schema 1.
-- Every object is named by its identity tuple (cluster, group, resource,
-- namespace, name) in separate columns; "group" is '' for core types and
-- namespace is '' for cluster-scoped objects. No Secret value is ever stored:
-- content_hash is a sha256 of the copied content.

-- Primaries relsync has seen on a platform cluster, and where their copy lives.
CREATE TABLE primaries (
  cluster        TEXT NOT NULL,
  "group"        TEXT NOT NULL,
  resource       TEXT NOT NULL,
  namespace      TEXT NOT NULL,
  name           TEXT NOT NULL,
  uid            TEXT NOT NULL,
  copy_cluster   TEXT NOT NULL,
  copy_namespace TEXT NOT NULL,
  copy_name      TEXT NOT NULL,
  -- synced | conflict | error | deleting
  state          TEXT NOT NULL,
  message        TEXT,
  first_seen_at  TEXT NOT NULL,
  last_synced_at TEXT,
  PRIMARY KEY (cluster, "group", resource, namespace, name)
) WITHOUT ROWID;

-- Resolved related objects: one row per (primary, rule, source object).
-- A row exists as soon as a rule resolves to a name, even before the object
-- exists (state 'pending'), so that its creation is routed to the primary.
CREATE TABLE relations (
  primary_cluster   TEXT NOT NULL,
  primary_group     TEXT NOT NULL,
  primary_resource  TEXT NOT NULL,
  primary_namespace TEXT NOT NULL,
  primary_name      TEXT NOT NULL,
  rule_id           TEXT NOT NULL,
  -- platform | service: which side is the source
  origin            TEXT NOT NULL,
  source_cluster    TEXT NOT NULL,
  source_group      TEXT NOT NULL,
  source_resource   TEXT NOT NULL,
  source_namespace  TEXT NOT NULL,
  source_name       TEXT NOT NULL,
  dest_cluster      TEXT NOT NULL,
  dest_group        TEXT NOT NULL,
  dest_resource     TEXT NOT NULL,
  dest_namespace    TEXT NOT NULL,
  dest_name         TEXT NOT NULL,
  -- pending | synced | conflict | error
  state             TEXT NOT NULL,
  content_hash      TEXT,
  message           TEXT,
  last_synced_at    TEXT,
  PRIMARY KEY (primary_cluster, primary_group, primary_resource, primary_namespace, primary_name,
               rule_id, source_cluster, source_group, source_resource, source_namespace, source_name),
  FOREIGN KEY (primary_cluster, primary_group, primary_resource, primary_namespace, primary_name)
    REFERENCES primaries (cluster, "group", resource, namespace, name) ON DELETE CASCADE
) WITHOUT ROWID;

-- An event on an object finds its owners through these two indexes.
CREATE INDEX relations_by_source ON relations (source_cluster, source_group, source_resource, source_namespace, source_name);
CREATE INDEX relations_by_dest ON relations (dest_cluster, dest_group, dest_resource, dest_namespace, dest_name);

CREATE INDEX primaries_by_copy ON primaries (copy_cluster, "group", resource, copy_namespace, copy_name);

-- Watch checkpoints: the last resourceVersion seen per cluster and type.
CREATE TABLE watch_checkpoints (
  cluster          TEXT NOT NULL,
  "group"          TEXT NOT NULL,
  resource         TEXT NOT NULL,
  label_selector   TEXT NOT NULL,
  resource_version TEXT NOT NULL,
  updated_at       TEXT NOT NULL,
  PRIMARY KEY (cluster, "group", resource, label_selector)
) WITHOUT ROWID;

-- Views for people (sqlite3 relsync.db 'select * from relations_view').
CREATE VIEW primaries_view AS
SELECT cluster,
       CASE WHEN "group" = '' THEN resource ELSE resource || '.' || "group" END AS type,
       namespace || '/' || name AS primary_object,
       copy_namespace || '/' || copy_name AS copy,
       state, message, last_synced_at
FROM primaries;

CREATE VIEW relations_view AS
SELECT primary_cluster AS cluster,
       CASE WHEN primary_group = '' THEN primary_resource ELSE primary_resource || '.' || primary_group END AS primary_type,
       primary_namespace || '/' || primary_name AS primary_object,
       rule_id AS rule,
       origin,
       source_cluster || ':' || CASE WHEN source_group = '' THEN source_resource ELSE source_resource || '.' || source_group END
         || ':' || source_namespace || '/' || source_name AS related_object,
       dest_cluster || ':' || CASE WHEN dest_group = '' THEN dest_resource ELSE dest_resource || '.' || dest_group END
         || ':' || dest_namespace || '/' || dest_name AS destination,
       state, message, last_synced_at
FROM relations;

-- Objects with more than one owner (one copy, kept until the last owner lets go).
CREATE VIEW shared_objects_view AS
SELECT source_cluster, source_group, source_resource, source_namespace, source_name, count(*) AS owners
FROM relations
GROUP BY source_cluster, source_group, source_resource, source_namespace, source_name
HAVING count(*) > 1;

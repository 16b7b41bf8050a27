-- relsync store, schema 4: kcp logical clusters.

-- The workspaces (logical clusters) relsync has seen through a kcp
-- platform's virtual workspace. A logical cluster's name is the `cluster` of
-- every identity of its objects in the other tables; this row says which
-- platform connection reaches it, so that work pending from the last run
-- finds its way back after a restart. `unbound`: its APIBinding is gone;
-- the row goes once no primary of it is left in the store.
CREATE TABLE logical_clusters (
  name           TEXT PRIMARY KEY,
  platform       TEXT NOT NULL,     -- platformClusters[].name of the kcp connection
  state          TEXT NOT NULL,     -- bound | unbound
  first_seen_at  TEXT NOT NULL,
  changed_at     TEXT NOT NULL
) WITHOUT ROWID;

CREATE INDEX logical_clusters_by_platform ON logical_clusters (platform);

-- relsync store, schema 9: what each tenant's copies take in the service cluster.

-- One row per copy relsync wrote into the service cluster (a primary's copy or
-- a related copy), charged to the platform cluster (kcp: the workspace) whose
-- object it copies, with the size of its content as relsync wrote it. The sum
-- per tenant is what limits.copiedBytesPerCluster and limits.copiesPerCluster
-- cap (issue #36: without a budget, one tenant could fill the provider's etcd
-- up to its quota, which stops every write). A row goes with its copy. Stores
-- of schema 8 start empty here: copies written before are counted as relsync
-- writes or checks them again.
CREATE TABLE copy_bytes (
  cluster   TEXT NOT NULL,
  "group"   TEXT NOT NULL,
  resource  TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name      TEXT NOT NULL,
  tenant    TEXT NOT NULL,
  -- the object it copies (identity key): only its own removal frees the row
  source    TEXT NOT NULL,
  bytes     INTEGER NOT NULL,
  PRIMARY KEY (cluster, "group", resource, namespace, name)
) WITHOUT ROWID;

CREATE INDEX copy_bytes_by_tenant ON copy_bytes (tenant, bytes);

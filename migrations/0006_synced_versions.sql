-- relsync store, schema 6: the versions a primary's last complete sync acted on.

-- A sweep lists everything and, for each primary, compares what its LISTs
-- show with what the primary's last complete reconcile read and wrote: the
-- resourceVersions of the primary, its copy, and each relation's source and
-- copy ('' for "did not exist"), under a fingerprint of the config that
-- reconcile ran with. Where all are the same, and no listed object is newly
-- found by a selector or inverse rule, the reconcile would do nothing and is
-- skipped (controller/sweep-skip.ts). NULL: not known; the primary is
-- reconciled. Rows written before this migration have NULL everywhere.
ALTER TABLE primaries ADD COLUMN synced_version TEXT;
ALTER TABLE primaries ADD COLUMN copy_version TEXT;
ALTER TABLE primaries ADD COLUMN synced_config TEXT;
ALTER TABLE relations ADD COLUMN source_version TEXT;
ALTER TABLE relations ADD COLUMN dest_version TEXT

-- relsync store, schema 7: the type of a primary's copy.

-- A resource may copy its primaries to another type in the service cluster
-- (`copyAs`, a PublishedResource's projection): the copy is then not of the
-- primary's group and resource. Rows written before this migration have
-- copies of the primary's own type, which the UPDATE records.
ALTER TABLE primaries ADD COLUMN copy_group TEXT NOT NULL DEFAULT '';
ALTER TABLE primaries ADD COLUMN copy_resource TEXT NOT NULL DEFAULT '';
UPDATE primaries SET copy_group = "group", copy_resource = resource;

-- Copy events are routed to their primary by this index (relation-store.ts primaryByCopy).
DROP INDEX primaries_by_copy;
CREATE INDEX primaries_by_copy ON primaries (copy_cluster, copy_group, copy_resource, copy_namespace, copy_name);

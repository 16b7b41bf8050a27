-- relsync store, schema 5: content hashes are keyed.

-- Related copies' content hashes are HMAC-SHA256 under a key kept in the
-- service cluster (sync/content-hasher.ts). The ones stored before were plain
-- sha256 of the content, with which a reader of this file could test guesses
-- of a Secret's values: they go (each relation gets a keyed one at its next
-- reconcile; the pages they were on are wiped after this migration, see
-- store/database.ts).
UPDATE relations SET content_hash = NULL WHERE content_hash IS NOT NULL

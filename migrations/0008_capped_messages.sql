-- relsync store, schema 8: messages of a bounded size.

-- A message may quote a tenant's values (a reference field of ~1 MB did), and
-- every row is read again at each start and sweep: a few hundred such rows
-- took the heap at every start (issue #36). relsync stores at most 1,024
-- characters of a message now (records.ts storedMessage); rows written before
-- are cut the same way, once.
UPDATE primaries SET message = substr(message, 1, 1024) || '… (' || length(message) || ' characters)' WHERE length(message) > 1024;
UPDATE relations SET message = substr(message, 1, 1024) || '… (' || length(message) || ' characters)' WHERE length(message) > 1024;

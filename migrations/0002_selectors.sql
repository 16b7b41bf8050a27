-- relsync store, schema 2: resolved label selectors, indexed for routing.
--
-- Each primary's selector rules are stored rendered (templates applied), with
-- the scope they apply to: source cluster, type and namespace. An event's
-- labels find candidate selectors through selector_terms, which holds the
-- (key, value) pairs of one equality-like requirement of each selector (an
-- object that matches the selector must carry one of them). Selectors with no
-- such requirement are marked anchored = 0 and checked for every event in
-- their scope; there are few of them. The full selector is then evaluated.

CREATE TABLE selectors (
  primary_cluster   TEXT NOT NULL,
  primary_group     TEXT NOT NULL,
  primary_resource  TEXT NOT NULL,
  primary_namespace TEXT NOT NULL,
  primary_name      TEXT NOT NULL,
  rule_id           TEXT NOT NULL,
  source_cluster    TEXT NOT NULL,
  source_group      TEXT NOT NULL,
  source_resource   TEXT NOT NULL,
  source_namespace  TEXT NOT NULL,
  -- JSON: [{"key":..., "operator": "In"|"NotIn"|"Exists"|"DoesNotExist", "values": [...]}]
  requirements      TEXT NOT NULL,
  -- the selector in the API's query form, for people
  selector_text     TEXT NOT NULL,
  anchored          INTEGER NOT NULL,
  PRIMARY KEY (primary_cluster, primary_group, primary_resource, primary_namespace, primary_name, rule_id),
  FOREIGN KEY (primary_cluster, primary_group, primary_resource, primary_namespace, primary_name)
    REFERENCES primaries (cluster, "group", resource, namespace, name) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE INDEX selectors_unanchored ON selectors (source_cluster, source_group, source_resource, source_namespace) WHERE anchored = 0;

CREATE TABLE selector_terms (
  source_cluster    TEXT NOT NULL,
  source_group      TEXT NOT NULL,
  source_resource   TEXT NOT NULL,
  source_namespace  TEXT NOT NULL,
  label_key         TEXT NOT NULL,
  label_value       TEXT NOT NULL,
  primary_cluster   TEXT NOT NULL,
  primary_group     TEXT NOT NULL,
  primary_resource  TEXT NOT NULL,
  primary_namespace TEXT NOT NULL,
  primary_name      TEXT NOT NULL,
  rule_id           TEXT NOT NULL,
  PRIMARY KEY (source_cluster, source_group, source_resource, source_namespace, label_key, label_value,
               primary_cluster, primary_group, primary_resource, primary_namespace, primary_name, rule_id),
  FOREIGN KEY (primary_cluster, primary_group, primary_resource, primary_namespace, primary_name, rule_id)
    REFERENCES selectors (primary_cluster, primary_group, primary_resource, primary_namespace, primary_name, rule_id) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE INDEX selector_terms_by_primary ON selector_terms (primary_cluster, primary_group, primary_resource, primary_namespace, primary_name, rule_id);

CREATE VIEW selectors_view AS
SELECT primary_cluster AS cluster,
       CASE WHEN primary_group = '' THEN primary_resource ELSE primary_resource || '.' || primary_group END AS primary_type,
       primary_namespace || '/' || primary_name AS primary_object,
       rule_id AS rule,
       CASE WHEN source_group = '' THEN source_resource ELSE source_resource || '.' || source_group END AS related_type,
       source_cluster || ':' || source_namespace AS scope,
       selector_text AS selector,
       anchored
FROM selectors;

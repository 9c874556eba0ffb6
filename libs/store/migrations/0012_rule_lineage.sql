-- Rule lineage: which rule each reworded rule replaced, per workspace and procedure. sopc
-- derives a rule's id from its kind and wording, so a reworded rule has a new id; a publish
-- matches the new release's rules to the live one's and writes one row per rule new to the
-- procedure. A row is never overwritten by a later publish (a wording that comes back keeps its
-- first row, and so its own lineage); only a manual link or unlink (how = manual) replaces one,
-- and the rebuild recomputes the rows that are not manual.
CREATE TABLE rule_lineage (
  workspace         text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  procedure_id      text NOT NULL,
  rule_id           text NOT NULL,
  -- the rule this one replaced; null for a new rule (or one made new by hand)
  previous_rule_id  text,
  how               text NOT NULL CHECK (how IN ('suggestion', 'matched', 'new', 'manual')),
  -- the two wordings' similarity (suggestion, matched); null otherwise
  similarity        double precision,
  -- the first release (by number) with this wording: when the wording came to be
  release_id        text REFERENCES sop_releases (id) ON DELETE SET NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace, procedure_id, rule_id),
  CHECK (previous_rule_id IS NULL OR previous_rule_id <> rule_id),
  CHECK (how IN ('manual', 'new') OR previous_rule_id IS NOT NULL)
);
CREATE INDEX rule_lineage_previous ON rule_lineage (workspace, procedure_id, previous_rule_id) WHERE previous_rule_id IS NOT NULL;

-- Every (procedure, rule) in the lineage of a rule id: the rules linked to it either way, to
-- any depth (a lineage is a tree: each rule has at most one previous rule). Empty for a rule
-- with no row and no successor (callers add the id itself). Filters (sessions ?rule=, Insights
-- ?rule=) use it so any wording's id names the whole lineage. UNION stops at rules seen.
CREATE FUNCTION rule_lineage_members(ws text, rule text) RETURNS TABLE (procedure_id text, rule_id text)
LANGUAGE sql STABLE AS $$
  WITH RECURSIVE m(procedure_id, rule_id) AS (
    SELECT DISTINCT l.procedure_id, rule FROM rule_lineage l WHERE l.workspace = ws AND (l.rule_id = rule OR l.previous_rule_id = rule)
    UNION
    SELECT l.procedure_id, CASE WHEN l.rule_id = m.rule_id THEN l.previous_rule_id ELSE l.rule_id END
      FROM rule_lineage l JOIN m ON l.workspace = ws AND l.procedure_id = m.procedure_id AND (l.rule_id = m.rule_id OR l.previous_rule_id = m.rule_id)
     WHERE l.previous_rule_id IS NOT NULL
  )
  SELECT procedure_id, rule_id FROM m
$$;

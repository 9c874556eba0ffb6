-- A wording that comes back: a rule id in a release of a procedure, not in the release before
-- it, that was in an earlier one (a revert: A, then B, then A again). Its rule_lineage row stays
-- as it was (one row per rule, never overwritten by a publish: the rule keeps its lineage id,
-- and the lineage stays a tree), and its return is one row here, at the release that brought it
-- back, with the wording it replaced there and how the publish matched them. A rule's lineage
-- (GET .../rules/{rule_id}/lineage) lists these steps with the rule_lineage rows, by release, so
-- it ends on the live wording. A publish writes them; the rebuild recomputes them.
CREATE TABLE rule_lineage_returns (
  workspace         text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  procedure_id      text NOT NULL,
  rule_id           text NOT NULL,
  -- the release that brought the wording back
  release_id        text NOT NULL REFERENCES sop_releases (id) ON DELETE CASCADE,
  -- the wording it replaced in that release; null when the publish matched it to none
  previous_rule_id  text,
  how               text NOT NULL CHECK (how IN ('suggestion', 'matched', 'new')),
  similarity        double precision,
  created_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace, procedure_id, rule_id, release_id),
  CHECK (previous_rule_id IS NULL OR previous_rule_id <> rule_id),
  CHECK (how = 'new' OR previous_rule_id IS NOT NULL)
);

-- Themes: a procedure's rule patterns grouped by the phase of the session where they happen
-- (opening, taking the order, closing...), named by the reasoning model, in session order
-- (position). A regrouping keeps a theme's id when it still fits (same name, or most of the
-- same rule patterns); a theme that fits nothing any more is retired, not deleted.
CREATE TABLE sop_themes (
  id            text PRIMARY KEY,
  workspace     text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  procedure_id  text NOT NULL,
  name          text NOT NULL,
  position      integer NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  grouped_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  retired_at    timestamptz
);
CREATE INDEX sop_themes_procedure ON sop_themes (workspace, procedure_id) WHERE retired_at IS NULL;
-- The patterns list and the review queue show each rule pattern's theme.
CREATE INDEX sop_patterns_theme ON sop_patterns (theme_id) WHERE theme_id IS NOT NULL;

-- Calibration (sopops calibrate): review bands fitted to a workspace's labels, one row per
-- rule question whose band a fit widened. A row is used only while the question reads the
-- same: rule_id is the rule's wording (sopc derives it from the text) and `wording` what the
-- question asks of it (with a warning sign's action, a step's condition), so a reworded rule
-- or a changed action goes back to SOPOPS_DECISIONS' band. A fit replaces the procedure's rows.
CREATE TABLE sop_calibration_bands (
  workspace     text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  procedure_id  text NOT NULL,
  rule_id       text NOT NULL,
  field         text NOT NULL CHECK (field IN ('condition', 'step', 'never', 'warning', 'responded')),
  wording       text NOT NULL,
  band_no       double precision NOT NULL CHECK (band_no >= 0),
  band_yes      double precision NOT NULL CHECK (band_yes <= 1),
  band_decide   double precision NOT NULL,
  -- the rule's lineage (labels on every wording of it were used) and the release fitted
  lineage_id    text NOT NULL,
  release_id    text REFERENCES sop_releases (id) ON DELETE SET NULL,
  labels        integer NOT NULL,
  negative_labels integer NOT NULL,
  fitted_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace, procedure_id, rule_id, field),
  CHECK (band_no < band_yes AND band_decide >= band_no AND band_decide <= band_yes)
);

-- Where a project's steering came from, so that NEATROOTS_STEERING can switch off what it
-- switched on: 'NEATROOTS_STEERING' when the setting turned it on (the review service turns it
-- off again at a start where the project is no longer listed), another name when it was switched
-- on another way ('demo': the demo project's, set at each start of the demo), which the setting
-- leaves as it is; NULL when it is off, or on from a version before this column (an earlier
-- version's review or demo: the review service's setting takes it over when it lists it).
-- Steering on before this came from the setting (the review service's seed), except the demo
-- project's, which the demo switches on (and marks so) at each start of the demo: the others are
-- marked the setting's, and one no longer listed is switched off at the next start. The demo's
-- stays NULL, so an empty setting does not claim it as one it listed.
ALTER TABLE projects ADD COLUMN steering_source text;
UPDATE projects SET steering_source = 'NEATROOTS_STEERING' WHERE steering AND name <> 'demo';

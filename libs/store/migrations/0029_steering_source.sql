-- Where a project's steering came from, so that NEATROOTS_STEERING can switch off what it
-- switched on: 'NEATROOTS_STEERING' when the setting turned it on (the review service turns it
-- off again at a start where the project is no longer listed), NULL when it is off or was
-- switched another way (the demo project), which the setting leaves as it is.
-- Steering on before this came from the setting (the review service's seed; the demo's is set
-- again at each start of the demo): it is marked so, and a project no longer listed is switched
-- off at the next start.
ALTER TABLE projects ADD COLUMN steering_source text;
UPDATE projects SET steering_source = 'NEATROOTS_STEERING' WHERE steering;

/**
 * @neatroots/review-domain: the review side of sopops as pure domain code: the three-way merge
 * behind a suggestion's freshness, rule lineage (which rule a reworded rule replaced), and
 * rule patterns: names, verdicts, suppression, review states, the roll-up of results, and
 * calibration (fitting the checker's review bands to reviewers' labels).
 */
export * from './suggestions';
export * from './lineage';
export * from './patterns';
export * from './findings/life';
export * from './calibration';

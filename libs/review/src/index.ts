/**
 * @neatroots/review-domain: the review side of sopops as pure domain code: the three-way merge
 * behind a suggestion's freshness, rule lineage (which rule a reworded rule replaced), and
 * rule patterns: names, verdicts, suppression, review states, the roll-up of results.
 */
export * from './suggestions';
export * from './lineage';
export * from './patterns';
export * from './findings/life';

/**
 * @neatroots/review-domain: the review side of sopops as pure domain code: the three-way merge
 * behind a suggestion's freshness, and rule lineage (which rule a reworded rule replaced).
 */
export * from './suggestions';
export * from './lineage';

/**
 * The bus contract: the messages the services exchange, their topics and their codecs.
 * The span stream itself (Span, StreamItem, Envelope) and its one mapping from the wire are
 * @neatroots/spans'; this library carries them on the bus without validating them again.
 */
export * from './notes';
export * from './findings';
export * from './questions';
export * from './envelope';
export * from './topics';

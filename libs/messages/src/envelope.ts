import type { v1 } from '@neatroots/proto';
import { SpanValidationError, eventToItem, itemToEvent, type Envelope } from '@neatroots/spans';

/**
 * An accepted item on the events topic. Ingest validated it (the one mapping in
 * @neatroots/spans, limits included) before publishing it, so the reader only decodes: the
 * item is read back through the same mapping, which a valid item passes unchanged.
 */
export function envelopeToProto(env: Envelope): v1.Envelope {
  return { project: env.project, received_ms: env.received_ms, event: itemToEvent(env.item) };
}

export function envelopeFromProto(msg: v1.Envelope): Envelope {
  if (!msg.event) throw new SpanValidationError('event', 'is missing from the envelope');
  return { project: msg.project, received_ms: msg.received_ms, item: eventToItem(msg.event) };
}

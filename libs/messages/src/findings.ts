import type { FindingEvent } from '@neatroots/checks';
import type { v1 } from '@neatroots/proto';

/**
 * A finding event as it travels on the findings topic (neatroots.v1.FindingEvent): the
 * engine's `FindingEvent` (@neatroots/checks owns its fields), except that a reader cannot
 * count on the check's rank, and its source is whatever the writer named.
 */
export type FindingMessage = Omit<FindingEvent, 'priority' | 'source'> & { priority?: number; source: string };

export function findingToProto(f: FindingMessage): v1.FindingEvent {
  return {
    id: f.id,
    project: f.project,
    run_id: f.run_id,
    check_id: f.check_id,
    status: f.status,
    span_ids: [...f.span_ids],
    count: f.count,
    action: f.action,
    title: f.title,
    guidance: f.guidance,
    at_ms: f.at_ms,
    group: f.group ?? '',
    workflow: f.workflow ?? '',
    kind: f.kind,
    check_source: f.source,
    received_ms: f.received_ms ?? 0,
    halt_suppressed: f.halt_suppressed ?? false,
    priority: f.priority ?? 0,
    quote: f.quote ?? '',
    probability: f.probability,
    confidence: f.confidence ?? '',
    answered_by: f.answered_by ?? '',
  };
}

const FINDING_STATUSES = new Set(['raised', 'updated', 'resolved']);

export function findingFromProto(msg: v1.FindingEvent): FindingMessage {
  if (!FINDING_STATUSES.has(msg.status)) {
    throw new Error(`finding ${msg.id}: status must be raised, updated or resolved, got ${JSON.stringify(msg.status)}`);
  }
  if (msg.action !== 'flag' && msg.action !== 'halt') {
    throw new Error(`finding ${msg.id}: action must be flag or halt, got ${JSON.stringify(msg.action)}`);
  }
  const f: FindingMessage = {
    id: msg.id,
    check_id: msg.check_id,
    run_id: msg.run_id,
    project: msg.project,
    status: msg.status as FindingMessage['status'],
    span_ids: msg.span_ids,
    count: msg.count,
    action: msg.action,
    title: msg.title,
    guidance: msg.guidance,
    at_ms: msg.at_ms,
    kind: msg.kind,
    source: msg.check_source,
  };
  if (msg.workflow) f.workflow = msg.workflow;
  if (msg.group) f.group = msg.group;
  if (msg.halt_suppressed) f.halt_suppressed = true;
  if (msg.received_ms) f.received_ms = msg.received_ms;
  if (msg.priority) f.priority = msg.priority;
  if (msg.quote) f.quote = msg.quote;
  if (msg.probability !== undefined) f.probability = msg.probability;
  if (msg.confidence) f.confidence = msg.confidence;
  if (msg.answered_by) f.answered_by = msg.answered_by;
  return f;
}

import type { v1 } from '@neatroots/proto';
import { SpanValidationError } from './errors';
import type { LimitCheck } from './limits';
import { itemRunId, type StreamItem } from './types';
import { eventToItem } from './wire';

/**
 * What ingest does with an export, whichever way it came (OTLP or neatroots.v1): each item
 * accepted or rejected on its own, the rejected ones in one shape, and every accepted item
 * stamped with the project of the API key.
 */

/** An item that could not be accepted: where it was in the request, and why. */
export interface Rejection {
  /** Its position in the request (OTLP: counting spans across resource_spans and scope_spans). */
  index: number;
  run_id?: string;
  span_id?: string;
  field: string;
  reason: string;
}

export interface MapResult {
  /** Accepted items (OTLP: with the run events derived from them), in order. */
  items: StreamItem[];
  /** Items in the request (OTLP: spans). */
  received: number;
  /** Items accepted (OTLP: spans, run events not counted). */
  accepted: number;
  rejected: Rejection[];
}

export interface MapOptions {
  /**
   * The project the export is authenticated for: an item naming another project is rejected,
   * and every accepted item is stamped with this one.
   */
  project?: string;
  /** Hold every item to these limits (ingest); an item past them is rejected. */
  limits?: LimitCheck;
}

export function rejectionOf(e: SpanValidationError, index: number): Rejection {
  const r: Rejection = { index, field: e.field, reason: e.reason };
  if (e.run_id) r.run_id = e.run_id;
  if (e.span_id) r.span_id = e.span_id;
  return r;
}

/** The project an item names, checked against the API key's, then set to it. */
export function stampProject(item: StreamItem, project: string): void {
  if (item.kind === 'run_end') return;
  const named = item.kind === 'span' ? item.span.project : item.run.project;
  if (named !== undefined && named !== project) {
    const spanId = item.kind === 'span' ? item.span.span_id : undefined;
    throw new SpanValidationError('project', `names project "${named}", but the API key is for "${project}"`, itemRunId(item), spanId);
  }
  if (item.kind === 'span') item.span.project = project;
  else item.run.project = project;
}

/** Maps the events of a neatroots.v1 export; every event is accepted or rejected on its own. */
export function mapEvents(events: readonly v1.Event[], opts: MapOptions = {}): MapResult {
  const items: StreamItem[] = [];
  const rejected: Rejection[] = [];
  events.forEach((ev, index) => {
    try {
      const item = eventToItem(ev, opts.limits);
      if (opts.project !== undefined) stampProject(item, opts.project);
      items.push(item);
    } catch (e) {
      if (!(e instanceof SpanValidationError)) throw e;
      rejected.push(rejectionOf(e, index));
    }
  });
  return { items, received: events.length, accepted: items.length, rejected };
}

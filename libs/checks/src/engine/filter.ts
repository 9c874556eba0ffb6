import type { Span } from '@neatroots/spans';
import type { SpanFilter } from '../types';

export type SpanPredicate = (span: Span) => boolean;

/** Compiles a span filter: every key optional, a list matches any of its values. */
export function compileFilter(f: SpanFilter | undefined): SpanPredicate {
  if (!f) return () => true;
  const type = f.type?.length ? new Set<string>(f.type) : undefined;
  const name = f.name?.length ? new Set(f.name) : undefined;
  const tool = f.tool?.length ? new Set(f.tool) : undefined;
  const status = f.status?.length ? new Set<string>(f.status) : undefined;
  return (s) =>
    (!type || type.has(s.type)) &&
    (!name || name.has(s.name)) &&
    (!tool || (s.tool !== undefined && tool.has(s.tool))) &&
    (!status || status.has(s.status));
}

import { useState, type FormEvent } from 'react';
import { href, Link, navigate, type Where } from './router';

/**
 * A list's filters and cursor paging as they stand in the URL (the API's own parameter names),
 * so a link opens the same list: the values read from the link, the form's fields, and a
 * submit that puts the new filters in the URL (back to the first page, the page size kept).
 * Shared by the Runs and Sessions lists.
 */
export function useUrlFilters<K extends string>(names: readonly K[], where: Where, path: string) {
  type Filters = Partial<Record<K, string>>;
  const params = Object.fromEntries(names.map((f) => [f, where.query.get(f) ?? undefined])) as Filters;
  const [form, setForm] = useState<Filters>(params);
  const field = (name: K) => ({
    name,
    value: form[name] ?? '',
    onChange: (e: { target: { value: string } }) => setForm((f) => ({ ...f, [name]: e.target.value })),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const trimmed = Object.fromEntries(Object.entries(form).map(([k, v]) => [k, (v as string | undefined)?.trim()]));
    navigate(href(path, { ...trimmed, cursor: undefined, limit: (params as Record<string, string | undefined>).limit }));
  };
  return { params, field, submit };
}

/** A local date-time from the form (2026-11-30T10:00) as the API's ISO-8601 time. */
export function toIso(v: string | undefined): string | undefined {
  if (!v) return undefined;
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? v : new Date(ms).toISOString();
}

/** The filters as the API takes them: from and to as ISO times. */
export function apiFilters<F extends { from?: string; to?: string }>(params: F): F {
  return { ...params, from: toIso(params.from), to: toIso(params.to) };
}

/** First page and next page links, following the API's cursor. */
export function Pager({ path, params, next, label }: { path: string; params: Record<string, string | undefined>; next: string | null | undefined; label: string }) {
  return (
    <nav className="pager" aria-label={label}>
      {params.cursor && <Link to={href(path, { ...params, cursor: undefined })}>First page</Link>}
      {next && (
        <Link to={href(path, { ...params, cursor: next })} rel="next">
          Next page
        </Link>
      )}
    </nav>
  );
}

/** What `field` gives an input: its name, value and change handler. */
type InputProps = { name: string; value: string; onChange: (e: { target: { value: string } }) => void };

/** The end of a list's filter form: the from/until times and the submit button. */
export function TimeRangeAndSubmit({ fromLabel, field }: { fromLabel: string; field: (name: 'from' | 'to') => InputProps }) {
  return (
    <>
      <label>
        {fromLabel}
        <input type="datetime-local" {...field('from')} />
      </label>
      <label>
        until
        <input type="datetime-local" {...field('to')} />
      </label>
      <button type="submit">Filter</button>
    </>
  );
}

/** What a list says when its answer is an error, or an empty page. */
export function ListState({ error, empty, noun, paged }: { error?: string | null; empty: boolean; noun: string; paged: boolean }) {
  if (error) return <p role="alert" className="error">{error}</p>;
  if (empty) return <p className="empty">No {noun}{paged ? ' on this page' : ''}.</p>;
  return null;
}

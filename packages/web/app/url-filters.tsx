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
  // The times as the form's fields take them: a link's API time (2030-01-01T00:00:00Z) shown in local time.
  const [form, setForm] = useState<Filters>(() =>
    Object.fromEntries(Object.entries(params).map(([k, v]) => [k, TIMES.has(k) ? toLocalInput(v as string | undefined) : v])) as Filters,
  );
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

/** The filters that are times: a datetime-local field in the form, an ISO-8601 time for the API. */
const TIMES = new Set(['from', 'to']);

const pad = (n: number) => String(n).padStart(2, '0');

/**
 * A time from a link as a datetime-local field shows it: local yyyy-MM-ddTHH:mm, with :ss when
 * it has seconds. The API's own forms (2030-01-01T00:00:00Z, an offset, a date alone) are read
 * as toIso reads them, so the field shows the filter that is applied; a value that is no time
 * is kept as it is (the API says what is wrong with it).
 */
export function toLocalInput(v: string | undefined): string | undefined {
  if (!v) return v;
  const ms = Date.parse(v);
  if (Number.isNaN(ms)) return v;
  const d = new Date(ms);
  const year = d.getFullYear();
  if (year < 1 || year > 9999) return v;
  const day = `${String(year).padStart(4, '0')}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return `${day}T${pad(d.getHours())}:${pad(d.getMinutes())}${d.getSeconds() ? `:${pad(d.getSeconds())}` : ''}`;
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

/** A time field: with seconds in its value, it steps by the second (else the browser refuses the form). */
function timeField(props: InputProps): InputProps & { step?: number } {
  return /T\d\d:\d\d:\d\d/.test(props.value) ? { ...props, step: 1 } : props;
}

/** What `field` gives an input: its name, value and change handler. */
type InputProps = { name: string; value: string; onChange: (e: { target: { value: string } }) => void };

/** The end of a list's filter form: the from/until times and the submit button. */
export function TimeRangeAndSubmit({ fromLabel, field }: { fromLabel: string; field: (name: 'from' | 'to') => InputProps }) {
  return (
    <>
      <label>
        {fromLabel}
        <input type="datetime-local" {...timeField(field('from'))} />
      </label>
      <label>
        until
        <input type="datetime-local" {...timeField(field('to'))} />
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

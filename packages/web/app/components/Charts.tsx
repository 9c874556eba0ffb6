import type { ReactNode } from 'react';
import { shown } from '../format';
import { Ext } from './Ext';

/**
 * Small SVG charts drawn from the API's numbers (no chart library): each has a title read by
 * screen readers, and its numbers in a table under *As a table*, so nothing is said by the
 * picture alone. Colours come from the theme's variables, so light and dark both read.
 */

const SERIES = 6;

/** Lines over a shared x axis (weeks, say); a null is a gap (no sessions that week). */
export function LineChart(props: {
  title: string;
  xLabels: string[];
  series: { name: string; values: (number | null)[] }[];
  /** The y axis' top (e.g. 1 for a rate). */
  max: number;
  format(v: number): string;
}) {
  const { xLabels, series, max, format } = props;
  const W = 640;
  const H = 200;
  const pad = { l: 44, r: 12, t: 10, b: 28 };
  const x = (i: number) => pad.l + (xLabels.length <= 1 ? 0 : (i * (W - pad.l - pad.r)) / (xLabels.length - 1));
  const y = (v: number) => pad.t + (1 - v / (max || 1)) * (H - pad.t - pad.b);
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => f * max);
  const every = Math.max(1, Math.ceil(xLabels.length / 8));
  return (
    <figure className="chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={props.title} preserveAspectRatio="xMinYMin meet">
        <title>{props.title}</title>
        {ticks.map((t) => (
          <g key={t}>
            <line className="grid" x1={pad.l} x2={W - pad.r} y1={y(t)} y2={y(t)} />
            <text className="axis" x={pad.l - 6} y={y(t) + 4} textAnchor="end">
              {format(t)}
            </text>
          </g>
        ))}
        {xLabels.map((l, i) =>
          i % every === 0 ? (
            <text key={l} className="axis" x={x(i)} y={H - 8} textAnchor="middle">
              {l.slice(5)}
            </text>
          ) : null,
        )}
        {series.map((s, si) => (
          <g key={s.name} className={`series series-${si % SERIES}`}>
            <path d={linePath(s.values, x, y)} fill="none" />
            {s.values.map((v, i) =>
              v === null ? null : (
                <circle key={i} cx={x(i)} cy={y(v)} r={3}>
                  <title>{`${shown(s.name)}, week of ${xLabels[i]}: ${format(v)}`}</title>
                </circle>
              ),
            )}
          </g>
        ))}
      </svg>
      <figcaption className="legend">
        {series.map((s, si) => (
          <span key={s.name} className={`key series-${si % SERIES}`}>
            <Ext>{s.name}</Ext>
          </span>
        ))}
      </figcaption>
      <AsTable head={['', ...xLabels]} rows={series.map((s) => [<Ext key="name">{s.name}</Ext>, ...s.values.map((v) => (v === null ? '—' : format(v)))])} />
    </figure>
  );
}

/** Segments joined where both ends have a value; a gap where one is missing. */
function linePath(values: (number | null)[], x: (i: number) => number, y: (v: number) => number): string {
  let d = '';
  let pen = false;
  values.forEach((v, i) => {
    if (v === null) {
      pen = false;
      return;
    }
    d += `${pen ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)} `;
    pen = true;
  });
  return d.trim();
}

/** A row's trend in a table cell: bars per week, the highest the cell's height. */
export function Sparkline({ values, label }: { values: number[]; label: string }) {
  const W = 120;
  const H = 24;
  const max = Math.max(1, ...values);
  const w = values.length ? W / values.length : W;
  return (
    <svg className="spark" viewBox={`0 0 ${W} ${H}`} width={W} height={H} role="img" aria-label={label}>
      <title>{label}</title>
      {values.map((v, i) => (
        <rect key={i} x={i * w + 0.5} width={Math.max(1, w - 1)} y={H - (v / max) * H} height={(v / max) * H} />
      ))}
    </svg>
  );
}

/** One bar split by parts (a result's share of sessions), each part named in its tooltip and the legend. */
export function StackedBar({ parts, label }: { parts: { name: string; value: number; className: string }[]; label: string }) {
  const total = parts.reduce((a, p) => a + p.value, 0);
  let at = 0;
  return (
    <figure className="chart stacked">
      <svg viewBox="0 0 400 18" role="img" aria-label={label} preserveAspectRatio="none">
        <title>{label}</title>
        {total === 0 && <rect className="empty-bar" x={0} y={0} width={400} height={18} />}
        {parts.map((p) => {
          if (!total || !p.value) return null;
          const w = (p.value / total) * 400;
          const r = (
            <rect key={p.name} className={p.className} x={at} y={0} width={w} height={18}>
              <title>{`${p.name}: ${p.value}`}</title>
            </rect>
          );
          at += w;
          return r;
        })}
      </svg>
      <figcaption className="legend">
        {parts.map((p) => (
          <span key={p.name} className={`key ${p.className}`}>
            {p.name} {p.value}
          </span>
        ))}
      </figcaption>
    </figure>
  );
}

function AsTable({ head, rows }: { head: string[]; rows: ReactNode[][] }) {
  return (
    <details className="as-table">
      <summary>As a table</summary>
      <div className="scroll-x">
        <table>
          <thead>
            <tr>
              {head.map((h, i) => (
                <th key={i} scope="col">
                  {h}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {rows.map((r, i) => (
              <tr key={i}>
                {r.map((c, j) => (j === 0 ? <th key={j} scope="row">{c}</th> : <td key={j}>{c}</td>))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </details>
  );
}

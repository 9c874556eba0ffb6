import { useEffect, useLayoutEffect, useRef, useState, type KeyboardEvent, type ReactNode } from 'react';
import { shown } from '../format';

/**
 * A list that puts only the rows in view (and a few either side) in the page: a run of 5,000
 * spans stays as quick to scroll as one of 50. Rows have one fixed height. Keyboard: one tab
 * stop; Up/Down, Page Up/Down, Home and End move the selection (a listbox).
 *
 * `rowKey` (what each row is, not where): rows added or moved above the view (a run page
 * following a run still going) leave the rows in view where they are, and the selected row is
 * scrolled to only when another row is selected, not when rows before it move it down.
 */
export function VirtualList(props: {
  count: number;
  rowHeight: number;
  selected: number;
  onSelect(index: number): void;
  renderRow(index: number): ReactNode;
  rowLabel(index: number): string;
  label: string;
  id: string;
  rowKey?(index: number): string;
}) {
  const { count, rowHeight, selected, onSelect, rowKey } = props;
  const box = useRef<HTMLDivElement>(null);
  const [top, setTop] = useState(0);
  const [height, setHeight] = useState(600);
  /** The row at the top of the view and how far it is scrolled past: kept there when rows change. */
  const anchor = useRef<{ key: string; offset: number } | null>(null);
  const remember = (el: HTMLDivElement) => {
    const i = Math.floor(el.scrollTop / rowHeight);
    anchor.current = rowKey && i < count ? { key: rowKey(i), offset: el.scrollTop - i * rowHeight } : null;
  };

  // The rows changed (rowKey is a new function): the row that was at the top goes back there.
  useLayoutEffect(() => {
    const el = box.current;
    if (!el || !rowKey) return;
    const a = anchor.current;
    const i = Math.floor(el.scrollTop / rowHeight);
    if (a && !(i < count && rowKey(i) === a.key)) {
      for (let j = 0; j < count; j++) {
        if (rowKey(j) !== a.key) continue;
        el.scrollTop = j * rowHeight + a.offset;
        setTop(el.scrollTop);
        break;
      }
    }
    remember(el);
  }, [rowKey, count, rowHeight]);

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = () => setHeight(el.clientHeight || 600);
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  // The selected row is kept in view (a shared link's span, a finding's cited span, the keys).
  const selectedKey = selected >= 0 && rowKey && selected < count ? rowKey(selected) : selected;
  useEffect(() => {
    const el = box.current;
    if (!el || selected < 0) return;
    const y = selected * rowHeight;
    if (y < el.scrollTop) el.scrollTop = y;
    else if (y + rowHeight > el.scrollTop + el.clientHeight) el.scrollTop = y + rowHeight - el.clientHeight;
    // The selected row, not its place: rows added above it do not scroll the view to it.
  }, [selectedKey, rowHeight]);

  const overscan = 8;
  const first = Math.max(0, Math.floor(top / rowHeight) - overscan);
  const last = Math.min(count, Math.ceil((top + height) / rowHeight) + overscan);
  const page = Math.max(1, Math.floor(height / rowHeight) - 1);

  const key = (e: KeyboardEvent) => {
    const to =
      e.key === 'ArrowDown' ? selected + 1
      : e.key === 'ArrowUp' ? selected - 1
      : e.key === 'PageDown' ? selected + page
      : e.key === 'PageUp' ? selected - page
      : e.key === 'Home' ? 0
      : e.key === 'End' ? count - 1
      : null;
    if (to === null || count === 0) return;
    e.preventDefault();
    onSelect(Math.min(count - 1, Math.max(0, to)));
  };

  const rows: ReactNode[] = [];
  for (let i = first; i < last; i++) {
    rows.push(
      <div
        key={i}
        id={`${props.id}-row-${i}`}
        role="option"
        aria-selected={i === selected}
        aria-label={shown(props.rowLabel(i))}
        className={i === selected ? 'vrow selected' : 'vrow'}
        style={{ top: i * rowHeight, height: rowHeight }}
        onClick={() => onSelect(i)}
      >
        {props.renderRow(i)}
      </div>,
    );
  }
  return (
    <div
      ref={box}
      id={props.id}
      className="vlist"
      role="listbox"
      tabIndex={0}
      aria-label={props.label}
      aria-activedescendant={selected >= 0 ? `${props.id}-row-${selected}` : undefined}
      onScroll={(e) => {
        setTop(e.currentTarget.scrollTop);
        remember(e.currentTarget);
      }}
      onKeyDown={key}
    >
      <div style={{ height: count * rowHeight, position: 'relative' }}>{rows}</div>
    </div>
  );
}

import { shown, shownText } from '../format';

/**
 * A string an agent, a model or an author wrote (a run id, a workflow, a tool's or a check's
 * name, a procedure's rule, a transcript's turn), wherever the app's own words surround it: in a
 * <bdi>, so its direction is its own and nothing in it (right-to-left letters, a control
 * character) reorders the text around it, with its bidi controls shown as markers (format.ts:
 * `shown`, or `shownText` for prose: `text`). Every page renders such strings through it.
 */
export function Ext({ children, text = false }: { children: string | null | undefined; text?: boolean }) {
  if (children === null || children === undefined) return null;
  return <bdi>{text ? shownText(children) : shown(children)}</bdi>;
}

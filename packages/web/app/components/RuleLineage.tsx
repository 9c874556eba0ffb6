import { api } from '../api';
import { percent } from '../format';
import { Ext } from './Ext';
import { useLoad } from '../load';
import type { Session } from '../session';

const HOW: Record<string, string> = {
  suggestion: 'an applied suggestion',
  matched: 'matched to the earlier wording',
  manual: 'linked by hand',
  new: 'a new rule',
};

/**
 * A rule's lineage (GET rules/{rule_id}/lineage): every wording it has had, by release, each at
 * the release it first appeared in and again at any release that brought it back, and how it
 * was linked to the one before; the last is the live wording. Findings on all of them count in
 * the same pattern.
 */
export function RuleLineage({ session, ruleId, procedure }: { session: Session; ruleId: string; procedure: string }) {
  const lineage = useLoad(() => api.ruleLineage(session, ruleId, procedure), [session, ruleId, procedure]);
  return (
    <section aria-labelledby="lineage-h">
      <h2 id="lineage-h">Lineage of the rule</h2>
      {lineage.error && <p className="error">{lineage.error}</p>}
      {lineage.data && (
        <ol className="lineage">
          {lineage.data.rules.map((r, i, all) => {
            // A wording listed before: this step is its return.
            const back = all.findIndex((x) => x.rule_id === r.rule_id) < i;
            return (
              <li key={`${r.rule_id}@${r.from_release ?? ''}`}>
                <span className="meta">{r.from_release !== null ? `release ${r.from_release}` : 'not released'}</span> {typeof r.text === 'string' ? <Ext text>{r.text}</Ext> : <code><Ext>{r.rule_id}</Ext></code>}{' '}
                <span className="meta">
                  {r.how && r.previous_rule_id ? `· ${back ? 'back, ' : ''}${HOW[r.how] ?? r.how}` : back ? '· back' : '· first wording'}
                  {r.similarity !== null && r.previous_rule_id ? ` (${percent(r.similarity)} alike)` : ''}
                </span>
              </li>
            );
          })}
        </ol>
      )}
    </section>
  );
}

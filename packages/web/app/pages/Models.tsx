import { api } from '../api';
import { Ext } from '../components/Ext';
import { percent } from '../format';
import { useLoad } from '../load';
import type { Session } from '../session';

/**
 * Settings → Models: per question of the project's checks, how often the fast classifier
 * agreed with the LLM, how many of the LLM's problems it caught (recall), and whether the
 * question now goes to the classifier first (both at least 90%, over at least 30 answers).
 */
export function Models({ session }: { session: Session }) {
  const data = useLoad(() => api.agreement(session), [session]);
  return (
    <main id="main" aria-busy={data.loading && !data.data ? true : undefined}>
      <h1>Settings → Models</h1>
      <p className="meta">
        Every LLM answer is also put to the fast classifier. Once it agrees on at least 90% of at least 30 answers for a question, and has caught at
        least 90% of the problems the LLM found among them (its recall; — while the LLM has found none), that question goes to the classifier first.
      </p>
      {data.loading && !data.data && <p className="meta">Loading…</p>}
      {data.error && <p role="alert" className="error">{data.error}</p>}
      {data.data && data.data.questions.length === 0 && <p className="empty">No question has been answered by an LLM yet.</p>}
      {data.data && data.data.questions.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Check</th>
              <th scope="col">Question</th>
              <th scope="col" className="num">LLM answers</th>
              <th scope="col" className="num">Agreed</th>
              <th scope="col" className="num">Agreement</th>
              <th scope="col" className="num">Recall</th>
              <th scope="col">Answered first by</th>
            </tr>
          </thead>
          <tbody>
            {data.data.questions.map((q) => (
              <tr key={q.question_key}>
                <td>
                  <code>
                    <Ext>{q.check_id}</Ext>
                  </code>
                </td>
                <td>
                  {q.ask ? <Ext text>{q.ask}</Ext> : <span className="meta">an earlier wording</span>}
                  <div className="meta">
                    <Ext>{q.question_key}</Ext>
                  </div>
                </td>
                <td className="num">{q.answers}</td>
                <td className="num">{q.agreed}</td>
                <td className="num">{percent(q.answers ? q.rate : null)}</td>
                <td className="num">{percent(q.recall)}</td>
                <td>{q.classifier_first ? <span className="badge ok">Fast classifier</span> : 'LLM'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}

import { Fragment, useEffect, useRef, useState } from 'react';
import { api } from '../api';
import { Ext } from '../components/Ext';
import { HeadEditor } from '../components/HeadEditor';
import { when } from '../format';
import { failure, useLoad } from '../load';
import type { Session } from '../session';
import { inReadingOrder, type Release } from '../sop-types';
import { UnifiedDiff } from '../components/UnifiedDiff';

const KIND_LABEL = { step: 'Step', never: 'Never', warning: 'Warning sign' } as const;

/**
 * Procedures: the live release (its procedures with their rules, its agents), the releases
 * before it, and what is saved at head but not yet published, as a unified diff.
 */
export function Procedures({ session }: { session: Session }) {
  // The releases summed up (no rules: they were tens of MB), the live one whole.
  const data = useLoad(() => api.procedures(session), [session]);
  const live = data.data?.live ?? undefined;
  const others = data.data?.releases.filter((r) => r.id !== live?.id) ?? [];
  const head = data.data?.head;
  const [published, setPublished] = useState<{ ok: boolean; text: string } | null>(null);
  // One publish at a time: the API publishes an unchanged head again on purpose, so a second
  // click (a double click) would make a second, identical release. The button stays disabled
  // until the page has read head again after the publish.
  const [publishing, setPublishing] = useState(false);
  const inFlight = useRef(false);
  useEffect(() => {
    inFlight.current = false;
    setPublishing(false);
  }, [data.data]);
  const publish = async () => {
    if (inFlight.current) return;
    inFlight.current = true;
    setPublishing(true);
    setPublished(null);
    try {
      const r = await api.publish(session);
      setPublished({ ok: true, text: `Published release ${r.number}: it is live.` });
      data.reload();
    } catch (err) {
      setPublished({ ok: false, text: `Not published: ${failure(err)}` });
      inFlight.current = false;
      setPublishing(false);
    }
  };
  return (
    <main id="main" aria-busy={data.loading && !data.data ? true : undefined}>
      <h1>Procedures</h1>
      {data.loading && !data.data && <p className="meta">Loading…</p>}
      {data.error && <p role="alert" className="error">{data.error}</p>}
      {data.data && !live && <p className="empty">Nothing published yet (sopops publish makes head the first release).</p>}
      {live && <LiveRelease release={live} />}
      {head && (
        <section aria-labelledby="unpublished">
          <h2 id="unpublished">Unpublished changes at head</h2>
          {head.changed.length === 0 ? (
            <p className="empty">{live ? 'Head is the same as the live release.' : 'Nothing is saved at head yet: write a file below, then publish it.'}</p>
          ) : (
            <>
              <ul className="plain changed">
                {head.changed.map((c) => (
                  <li key={c.path}>
                    <span className={`badge change-${c.change}`}>{c.change}</span>{' '}
                    <code>
                      <Ext>{c.path}</Ext>
                    </code>
                  </li>
                ))}
              </ul>
              <UnifiedDiff label="Unified diff of head against the live release" text={head.diff} />
              <p>
                <button type="button" onClick={() => void publish()} disabled={publishing || data.loading}>
                  Publish head as release {(head.live_release?.number ?? 0) + 1}
                </button>
              </p>
            </>
          )}
          {published && (
            <p role={published.ok ? 'status' : 'alert'} className={published.ok ? 'ok' : 'error'}>
              {published.text}
            </p>
          )}
        </section>
      )}
      {head && <HeadEditor session={session} head={head} onSaved={data.reload} />}
      {others.length > 0 && (
        <section aria-labelledby="earlier">
          <h2 id="earlier">Earlier releases</h2>
          <table>
            <thead>
              <tr>
                <th scope="col" className="num">Release</th>
                <th scope="col">Published</th>
                <th scope="col">Procedures</th>
                <th scope="col">Id</th>
              </tr>
            </thead>
            <tbody>
              {others.map((r) => (
                <tr key={r.id}>
                  <td className="num">{r.number}</td>
                  <td>{when(r.created_at)}</td>
                  <td>
                    {r.procedures.length === 0
                      ? '—'
                      : r.procedures.map((p, i) => (
                          <Fragment key={p.procedure_id}>
                            {i > 0 && ', '}
                            <Ext>{p.name}</Ext> v{p.version}
                          </Fragment>
                        ))}
                  </td>
                  <td>
                    <code>
                      <Ext>{r.id}</Ext>
                    </code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
    </main>
  );
}

function LiveRelease({ release: r }: { release: Release }) {
  return (
    <section aria-labelledby="live">
      <h2 id="live">
        Live release {r.number}{' '}
        <span className="meta">
          published {when(r.created_at)} ·{' '}
          <code>
            <Ext>{r.id}</Ext>
          </code>
        </span>
      </h2>
      {r.procedures.map((p) => (
        <details key={p.procedure_id} className="procedure" open>
          <summary>
            <strong>
              <Ext>{p.name}</Ext>
            </strong>{' '}
            <span className="meta">
              v{p.version} · <Ext>{p.procedure_id}</Ext>
            </span>
          </summary>
          {p.goal && (
            <p>
              Goal: <Ext text>{p.goal}</Ext>
            </p>
          )}
          {p.applies_when && (
            <p className="meta">
              Applies when: <Ext text>{p.applies_when}</Ext>
            </p>
          )}
          <ol className="plain lock-rules">
            {inReadingOrder(p.rules).map((rule) => (
              <li key={rule.rule_id}>
                <span className="meta">
                  {KIND_LABEL[rule.kind]} {rule.index}
                </span>{' '}
                <Ext text>{rule.text}</Ext>
                {rule.required && <span className="badge halt">required</span>}
                {rule.tool && (
                  <span className="badge">
                    tool: <Ext>{rule.tool}</Ext>
                  </span>
                )}
                {rule.when && (
                  <span className="badge">
                    when: <Ext text>{rule.when}</Ext>
                  </span>
                )}
                {rule.action && (
                  <span className="meta">
                    {' '}
                    → <Ext text>{rule.action}</Ext>
                  </span>
                )}
              </li>
            ))}
          </ol>
        </details>
      ))}
      <h3>Agents</h3>
      {r.agents.length === 0 ? (
        <p className="empty">No agents in this release.</p>
      ) : (
        <table className="agents">
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">Procedures</th>
            </tr>
          </thead>
          <tbody>
            {r.agents.map((a) => (
              <tr key={a.agent}>
                <td>
                  <Ext>{a.agent}</Ext>
                </td>
                <td>
                  {a.procedures.length === 0
                    ? '—'
                    : a.procedures.map((p, i) => (
                        <Fragment key={p}>
                          {i > 0 && ', '}
                          <Ext>{p}</Ext>
                        </Fragment>
                      ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}


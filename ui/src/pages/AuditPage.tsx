import { useCallback, useEffect, useState } from 'react';
import type { AuditEntry } from '../api/types';
import { ErrorNotice } from '../components/ErrorNotice';
import { Truncated } from '../components/Truncated';
import { useLive } from '../live';
import { useSession } from '../session';
import { formatDateTime } from '../format';
import { describeChange } from './audit/describe-change';

const pageSize = 50;
/** Entries kept on screen (live ones are added on top); older ones are a "Load older" away. */
const maxShownEntries = 1000;

/** Every change: who, when, what, before and after; failed ones too. New ones appear live. */
export function AuditPage() {
  const { client } = useSession();
  const { onChange } = useLive();
  const [entries, setEntries] = useState<AuditEntry[]>([]);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>();
  const [exhausted, setExhausted] = useState(false);

  const loadPage = useCallback(
    async (beforeId: string | undefined) => {
      setLoading(true);
      setError(undefined);
      try {
        const { entries: page } = await client.get<{ entries: AuditEntry[] }>(
          `/audit?limit=${pageSize}${beforeId ? `&before=${encodeURIComponent(beforeId)}` : ''}`,
        );
        setEntries((current) => merge(beforeId ? current : [], page));
        setExhausted(page.length < pageSize);
      } catch (failure) {
        setError(failure);
      } finally {
        setLoading(false);
      }
    },
    [client],
  );

  useEffect(() => {
    void loadPage(undefined);
  }, [loadPage]);
  useEffect(() => onChange((entry) => setEntries((current) => merge(current, [entry]))), [onChange]);

  const oldest = entries.at(-1);
  return (
    <>
      <h1>Audit</h1>
      <p className="lead">Every change made through the control plane, newest first; new ones appear as they happen.</p>
      <ErrorNotice error={error} action="Loading the audit log" />
      <div className="table-scroll">
        <table className="table audit-table">
          <caption className="visually-hidden">Audit log</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Who</th>
              <th scope="col">What</th>
              <th scope="col">Target</th>
              <th scope="col">Outcome</th>
              <th scope="col">Change</th>
              <th scope="col">Before and after</th>
            </tr>
          </thead>
          <tbody>
            {entries.length === 0 && !loading ? (
              <tr>
                <td colSpan={7} className="muted">
                  No change has been made yet.
                </td>
              </tr>
            ) : (
              entries.map((entry) => <AuditRow key={entry.id} entry={entry} />)
            )}
          </tbody>
        </table>
      </div>
      <div className="form-actions">
        <button type="button" onClick={() => oldest && void loadPage(oldest.id)} disabled={loading || exhausted || !oldest}>
          {loading ? 'Loading…' : exhausted ? 'No older entries' : 'Load older'}
        </button>
      </div>
    </>
  );
}

function AuditRow({ entry }: { entry: AuditEntry }) {
  return (
    <tr className={entry.outcome === 'failed' ? 'row-warning' : undefined}>
      <td className="nowrap">{formatDateTime(entry.atUnixMs)}</td>
      <td>
        <Truncated text={entry.actor} />
      </td>
      <td className="nowrap">{entry.action}</td>
      <td>
        <Truncated text={entry.target} />
      </td>
      <td>
        {entry.outcome === 'ok' ? <span className="tag tag-ok">ok</span> : <span className="tag tag-warning">failed</span>}
        {entry.error && <p className="audit-error">{entry.error}</p>}
      </td>
      <td>
        {entry.reason && (
          <p className="audit-reason">
            Reason: <Truncated text={entry.reason} />
          </p>
        )}
        <ul className="audit-change">
          {describeChange(entry.action, entry.before, entry.after).map((line, i) => (
            <li key={i}>{line}</li>
          ))}
        </ul>
      </td>
      <td>
        <details className="json-details">
          <summary>JSON</summary>
          {entry.request !== undefined && (
            <>
              <p className="json-label">Asked</p>
              <JsonValue value={entry.request} />
            </>
          )}
          <p className="json-label">Before</p>
          <JsonValue value={entry.before} />
          <p className="json-label">After</p>
          <JsonValue value={entry.after} />
        </details>
      </td>
    </tr>
  );
}

/** A before or after value as indented JSON text. */
function JsonValue({ value }: { value: unknown }) {
  if (value === null || value === undefined) return <p className="muted">—</p>;
  return <pre className="json">{JSON.stringify(value, null, 2)}</pre>;
}

/** Newest first, each id once, at most maxShownEntries. */
function merge(current: AuditEntry[], more: AuditEntry[]): AuditEntry[] {
  const byId = new Map(current.map((entry) => [entry.id, entry]));
  for (const entry of more) byId.set(entry.id, entry);
  return [...byId.values()].sort((a, b) => compareIds(b.id, a.id)).slice(0, maxShownEntries);
}

/** Ids are whole numbers as text (PostgreSQL's, in the order entries were written); "<ms>-<seq>" (the Redis stream ids of before) compare too. */
function compareIds(a: string, b: string): number {
  const [aMs = 0, aSeq = 0] = a.split('-').map(Number);
  const [bMs = 0, bSeq = 0] = b.split('-').map(Number);
  return aMs - bMs || aSeq - bSeq;
}

import { useCallback, useEffect, useState } from 'react';
import type { TrafficView } from '../api/types';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { ErrorNotice } from '../components/ErrorNotice';
import { ReadOnlyNote } from '../components/ReadOnlyNote';
import { Truncated } from '../components/Truncated';
import { useAction } from '../hooks/useAction';
import { usePolled } from '../hooks/usePolled';
import { useRefreshOnChange } from '../hooks/useRefreshOnChange';
import { useSession, useWhyReadOnly } from '../session';
import { formatTime } from '../format';

/** The key of the default share among the rows (integration names cannot hold spaces). */
const defaultKey = 'others (default)';

interface Row {
  key: string;
  /** What the flag says. */
  percent: number;
  /** What balancers do now: 0 while rolled back. */
  effectivePercent: number;
  rolledBack: boolean;
}

interface PlannedChange {
  key: string;
  fromPercent: number;
  toPercent: number;
  rolledBack: boolean;
}

/** Shares of task keys sent to the candidate cluster, per integration and for the rest. */
export function TrafficPage() {
  const { client } = useSession();
  const whyReadOnly = useWhyReadOnly();
  const load = useCallback((signal: AbortSignal) => client.get<TrafficView>('/traffic', signal), [client]);
  const traffic = usePolled(load, 5000);
  useRefreshOnChange(['traffic.set', 'rollback', 'resume', 'override.rebuild'], traffic.refresh);
  const [draft, setDraft] = useState<Record<string, number>>({});
  const [confirming, setConfirming] = useState(false);
  const [applied, apply, resetApplied] = useAction<{ view: TrafficView; changes: PlannedChange[] }>();

  const view = traffic.data;
  if (!view) {
    return (
      <>
        <h1>Traffic</h1>
        {traffic.error ? <ErrorNotice error={traffic.error} action="Loading the traffic split" /> : <p className="muted">Loading…</p>}
      </>
    );
  }
  const allBack = !view.flag.enabled || view.override?.all === true;
  const rows: Row[] = [
    ...Object.entries(view.flag.integrations).map(([key, setting]) => ({
      key,
      percent: setting.percent,
      effectivePercent: view.effectivePercent.integrations[key] ?? setting.percent,
      rolledBack: allBack || setting.rolledBack || view.override?.integrations.includes(key) === true,
    })),
    { key: defaultKey, percent: view.flag.defaultPercent, effectivePercent: view.effectivePercent.default, rolledBack: allBack },
  ];
  const changes: PlannedChange[] = rows
    .filter((row) => draft[row.key] !== undefined && draft[row.key] !== row.percent)
    .map((row) => ({ key: row.key, fromPercent: row.percent, toPercent: draft[row.key]!, rolledBack: row.rolledBack }));

  const setPercent = (key: string, value: number) => {
    resetApplied();
    setDraft((current) => ({ ...current, [key]: Math.min(100, Math.max(0, Math.round(value))) }));
  };

  const confirmChange = () =>
    apply(async () => {
      const integrations = Object.fromEntries(changes.filter((c) => c.key !== defaultKey).map((c) => [c.key, c.toPercent]));
      const defaultChange = changes.find((c) => c.key === defaultKey);
      const body = {
        ...(defaultChange ? { defaultPercent: defaultChange.toPercent } : {}),
        ...(Object.keys(integrations).length > 0 ? { integrations } : {}),
      };
      const result = await client.send<TrafficView>('PUT', '/traffic', body).catch((error: unknown) => {
        // The failure may have left part of the change in place: show what Unleash has now.
        traffic.refresh();
        throw error;
      });
      traffic.set(result);
      setDraft({});
      return { view: result, changes };
    });

  return (
    <>
      <h1>Traffic</h1>
      <p className="lead">Share of task keys sent to the candidate cluster. A key stays where it is while its share only grows.</p>
      <ReadOnlyNote />
      {allBack && (
        <p className="notice notice-warning">Everything is rolled back to the baseline: new shares apply once traffic is resumed (on the Rollback page).</p>
      )}
      <form
        className="card traffic-form"
        onSubmit={(event) => {
          event.preventDefault();
          if (changes.length > 0 && !whyReadOnly) setConfirming(true);
        }}
      >
        <table className="table traffic-table">
          <caption className="visually-hidden">Share of each integration on the candidate cluster</caption>
          <thead>
            <tr>
              <th scope="col">Integration</th>
              <th scope="col">Share on the candidate</th>
              <th scope="col" className="numeric">
                In effect
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <ShareRow
                key={row.key}
                row={row}
                value={draft[row.key] ?? row.percent}
                onChange={(value) => setPercent(row.key, value)}
                disabledBecause={whyReadOnly}
              />
            ))}
          </tbody>
        </table>
        <div className="form-actions">
          <button type="submit" className="button-primary" disabled={changes.length === 0 || whyReadOnly !== undefined} title={whyReadOnly}>
            Review {changes.length === 0 ? 'changes' : changes.length === 1 ? '1 change' : `${changes.length} changes`}…
          </button>
          <button type="button" onClick={() => setDraft({})} disabled={changes.length === 0}>
            Discard
          </button>
        </div>
      </form>
      <ConfirmDialog open={confirming} title="Change the traffic split?" confirmLabel="Apply" onConfirm={confirmChange} onClose={() => setConfirming(false)}>
        <ChangeList changes={changes} />
      </ConfirmDialog>
      {applied.status === 'failed' && <ErrorNotice error={applied.error} action="Changing the split" change />}
      {applied.status === 'done' && <AppliedChange changes={applied.result.changes} view={applied.result.view} atUnixMs={applied.atUnixMs} />}
      {traffic.error !== undefined && <ErrorNotice error={traffic.error} action="Refreshing the traffic split" />}
    </>
  );
}

function ShareRow(props: { row: Row; value: number; onChange(value: number): void; disabledBecause: string | undefined }) {
  const { row, value } = props;
  const id = `share-${row.key.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const disabled = props.disabledBecause !== undefined;
  return (
    <tr className={value !== row.percent ? 'row-changed' : undefined}>
      <th scope="row">
        <label htmlFor={id}>
          <Truncated text={row.key} />
        </label>
        {row.rolledBack && <span className="tag tag-warning">rolled back</span>}
      </th>
      <td>
        <div className="share-inputs">
          <input
            id={id}
            type="range"
            min={0}
            max={100}
            step={1}
            value={value}
            disabled={disabled}
            title={props.disabledBecause}
            onChange={(event) => props.onChange(Number(event.target.value))}
          />
          <input
            type="number"
            min={0}
            max={100}
            step={1}
            value={value}
            disabled={disabled}
            title={props.disabledBecause}
            aria-label={`${row.key}: percent on the candidate`}
            onChange={(event) => event.target.value !== '' && props.onChange(Number(event.target.value))}
          />
          <span aria-hidden="true">%</span>
        </div>
      </td>
      <td className="numeric">{row.effectivePercent}%</td>
    </tr>
  );
}

function ChangeList({ changes }: { changes: PlannedChange[] }) {
  return (
    <ul className="change-list">
      {changes.map((change) => (
        <li key={change.key}>
          <Truncated text={change.key} className="change-name" />: from {change.fromPercent}% to {change.toPercent}%
          {change.rolledBack && <span className="stat-note"> (rolled back: takes effect once resumed)</span>}
        </li>
      ))}
    </ul>
  );
}

/**
 * Balancers read the flag from Unleash by polling (about every second); each says in its
 * heartbeat which split its flag client has, and GET /traffic compares that with Unleash. So
 * after a change the page asks again every half second until every balancer has it.
 */
function AppliedChange({ changes, view, atUnixMs }: { changes: PlannedChange[]; view: TrafficView; atUnixMs: number }) {
  const { client } = useSession();
  const [caughtUpAtMs, setCaughtUpAtMs] = useState<number | undefined>();
  const load = useCallback((signal: AbortSignal) => client.get<TrafficView>('/traffic', signal), [client]);
  const polled = usePolled(load, caughtUpAtMs === undefined ? 500 : 5000);
  const balancers = (polled.data ?? view).balancers;
  const following = balancers.filter((b) => b.trafficFlagUpToDate !== null);
  const waiting = following.filter((b) => b.trafficFlagUpToDate === false);
  const allHaveIt = polled.data !== undefined && following.length > 0 && waiting.length === 0;
  useEffect(() => {
    if (allHaveIt && caughtUpAtMs === undefined) setCaughtUpAtMs(Date.now());
  }, [allHaveIt, caughtUpAtMs]);
  const withoutFlag = balancers.length - following.length;
  return (
    <section className="notice notice-success" role="status" aria-label="Change applied">
      <p className="notice-title">Applied in Unleash at {formatTime(atUnixMs)}</p>
      <ChangeList changes={changes} />
      {balancers.length === 0 ? (
        <p>No balancer is running: each one reads the flag when it starts.</p>
      ) : caughtUpAtMs !== undefined ? (
        <p data-testid="traffic-propagated">
          Every balancer has it ({following.length} of {following.length}), {((caughtUpAtMs - atUnixMs) / 1000).toFixed(1)} s after the change.
        </p>
      ) : (
        <p>
          {following.length - waiting.length} of {following.length} balancers have it; waiting for{' '}
          {waiting.map((b, i) => (
            <span key={b.balancerId}>
              {i > 0 && ', '}
              <Truncated text={b.balancerId} />
            </span>
          ))}{' '}
          (they poll Unleash about every second).
        </p>
      )}
      {withoutFlag > 0 && (
        <p className="stat-note">
          {withoutFlag} balancer{withoutFlag === 1 ? ' routes' : 's route'} by a fixed split of {withoutFlag === 1 ? 'its' : 'their'} own, not by the flag: the
          change does not reach {withoutFlag === 1 ? 'it' : 'them'}.
        </p>
      )}
    </section>
  );
}

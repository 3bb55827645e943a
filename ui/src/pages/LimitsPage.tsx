import { Fragment, useCallback, useState } from 'react';
import type { IntegrationLimit, IntegrationLimitView, LimitsView } from '../api/types';
import { ErrorNotice } from '../components/ErrorNotice';
import { ReadOnlyNote } from '../components/ReadOnlyNote';
import { useAction } from '../hooks/useAction';
import { usePolled } from '../hooks/usePolled';
import { useRefreshOnChange } from '../hooks/useRefreshOnChange';
import { useSession, useWhyReadOnly } from '../session';
import { formatCount, formatTime, missing } from '../format';
import { LimitChart } from './limits/LimitChart';
import { useOpenCharts } from './limits/useOpenCharts';

/** The in-flight part the form sets; 'default' keeps the default in flight (for a start rate alone). */
type Kind = 'maxInFlight' | 'shareOfCapacity' | 'auto' | 'off' | 'default';

interface LimitChange {
  cluster: string;
  integration: string;
  /** null removes the integration's own limit. */
  limit: IntegrationLimit | null;
}

/** A start rate as set (exact, not rounded like a measured rate). */
export const formatStartRate = (perSecond: number | null | undefined): string =>
  typeof perSecond === 'number' && Number.isFinite(perSecond) ? `${perSecond.toLocaleString('en-US', { maximumFractionDigits: 3 })}/s` : missing;

const describeInFlight = (limit: IntegrationLimit, withRate: boolean): string =>
  'auto' in limit
    ? `auto, ${limit.auto.minInFlight}-${limit.auto.maxInFlight} in flight`
    : 'off' in limit
      ? withRate
        ? 'no in-flight limit'
        : 'no limit'
      : 'maxInFlight' in limit
        ? `${limit.maxInFlight} in flight`
        : 'shareOfCapacity' in limit
          ? `${Math.round(limit.shareOfCapacity * 1000) / 10}% of capacity`
          : 'default in flight';

export const describeLimit = (limit: IntegrationLimit): string => {
  const rate = 'maxStartsPerSecond' in limit ? limit.maxStartsPerSecond : undefined;
  return rate === undefined ? describeInFlight(limit, false) : `${describeInFlight(limit, true)}, at most ${formatStartRate(rate)} starts`;
};

/**
 * What the form sends: auto takes "min-max"; an optional start rate goes beside the in-flight
 * part (or alone, with 'default'). The server validates, so its error names the field.
 */
function limitOf(kind: Kind, value: string, startsPerSecond: string): IntegrationLimit {
  const rate = startsPerSecond.trim() === '' ? {} : { maxStartsPerSecond: Number(startsPerSecond) };
  if (kind === 'default') return { maxStartsPerSecond: Number(startsPerSecond) };
  if (kind === 'off') return { off: true, ...rate };
  if (kind === 'auto') {
    const [min, max] = value.split('-').map((part) => Number(part.trim()));
    return { auto: { minInFlight: min ?? NaN, maxInFlight: max ?? NaN }, ...rate } as IntegrationLimit;
  }
  return { [kind]: Number(value), ...rate } as IntegrationLimit;
}

/** Per-integration limits in flight per cluster: the ledger enforces them, PostgreSQL keeps them. */
export function LimitsPage() {
  const { client } = useSession();
  const whyReadOnly = useWhyReadOnly();
  const load = useCallback((signal: AbortSignal) => client.get<LimitsView>('/limits', signal), [client]);
  const limits = usePolled(load, 2000);
  useRefreshOnChange(['limit.set', 'limit.remove', 'limit.reapply'], limits.refresh);
  const [applied, apply] = useAction<LimitChange>();
  const charts = useOpenCharts(limits.data);
  const columns = whyReadOnly === undefined ? 8 : 7;

  const change = (planned: LimitChange, reason: string) =>
    apply(async () => {
      const path = `/limits/${encodeURIComponent(planned.cluster)}/${encodeURIComponent(planned.integration)}`;
      const body = { ...(planned.limit === null ? {} : { limit: planned.limit }), ...(reason ? { reason } : {}) };
      const answer = await client.send<LimitsView>(planned.limit === null ? 'DELETE' : 'PUT', path, body).catch((error: unknown) => {
        limits.refresh();
        throw error;
      });
      limits.set(answer);
      return planned;
    });

  return (
    <>
      <h1>Limits</h1>
      <p className="lead">
        How many tasks of one integration may run at once in a cluster, so that a slow bank cannot hold every slot, and optionally how many may start per
        second, for a bank with a rate limit of its own. An integration without a limit of its own gets the default
        {limits.data ? ` (${describeLimit(limits.data.default)})` : ''}. Tasks over the limit wait without holding up other integrations.
      </p>
      <ReadOnlyNote />
      {limits.error !== undefined && <ErrorNotice error={limits.error} action="Loading the limits" />}
      {applied.status === 'failed' && <ErrorNotice error={applied.error} action="Changing a limit" change />}
      {applied.status === 'done' && (
        <p className="notice notice-success" role="status">
          {applied.result.limit === null
            ? `Removed the limit of ${applied.result.integration} on ${applied.result.cluster} at ${formatTime(applied.atUnixMs)}: the default applies.`
            : `Set ${applied.result.integration} on ${applied.result.cluster} to ${describeLimit(applied.result.limit)} at ${formatTime(applied.atUnixMs)}.`}
        </p>
      )}
      {limits.data?.clusters.map((cluster) => (
        <section key={cluster.cluster} className={`card tone-${cluster.role}`} aria-label={`Limits of ${cluster.cluster}`}>
          <h2 className="card-title">
            {cluster.cluster} ({cluster.role}, {formatCount(cluster.capacitySlots)} slots)
          </h2>
          <div className="table-scroll">
            <table className="table limits-table">
              <thead>
                <tr>
                  <th scope="col">Integration</th>
                  <th scope="col">Limit</th>
                  <th scope="col">Max in flight</th>
                  <th scope="col" title="Most task starts per second in the cluster, across every balancer">
                    Max starts
                  </th>
                  <th scope="col">In flight</th>
                  <th scope="col">Waiting</th>
                  <th scope="col" title="Refused at the limit by balancers over the last 10-20 s">
                    Refused (10 s)
                  </th>
                  {whyReadOnly === undefined && <th scope="col">Change</th>}
                  <th scope="col">Chart (15 min)</th>
                </tr>
              </thead>
              <tbody>
                {cluster.integrations.map((row) => {
                  const open = charts.isOpen(cluster.cluster, row.integration);
                  return (
                    <Fragment key={row.integration}>
                      <LimitRow
                        cluster={cluster.cluster}
                        row={row}
                        busy={applied.status === 'running'}
                        canChange={whyReadOnly === undefined}
                        onChange={change}
                        chartOpen={open}
                        onToggleChart={() => charts.toggle(cluster.cluster, row.integration)}
                      />
                      {open && (
                        <tr className="limit-chart-row">
                          <td colSpan={columns}>
                            <LimitChart cluster={cluster.cluster} integration={row.integration} />
                          </td>
                        </tr>
                      )}
                    </Fragment>
                  );
                })}
              </tbody>
            </table>
          </div>
        </section>
      ))}
    </>
  );
}

function LimitRow(props: {
  cluster: string;
  row: IntegrationLimitView;
  busy: boolean;
  canChange: boolean;
  onChange(change: LimitChange, reason: string): Promise<void>;
  chartOpen: boolean;
  onToggleChart(): void;
}) {
  const { cluster, row } = props;
  const [kind, setKind] = useState<Kind>('maxInFlight');
  const [value, setValue] = useState('');
  const [startsPerSecond, setStartsPerSecond] = useState('');
  const [reason, setReason] = useState('');
  const id = `limit-${cluster}-${row.integration}`.replace(/[^A-Za-z0-9_-]/g, '_');
  return (
    <tr data-testid={id}>
      <th scope="row">{row.integration}</th>
      <td data-testid={`${id}-setting`}>{row.source === 'own' ? describeLimit(row.limit) : `default (${describeLimit(row.limit)})`}</td>
      <td data-testid={`${id}-max`}>{row.maxInFlight === null ? '∞' : formatCount(row.maxInFlight)}</td>
      <td data-testid={`${id}-rate`}>{formatStartRate(row.maxStartsPerSecond)}</td>
      <td>{formatCount(row.inflight)}</td>
      <td data-testid={`${id}-waiting`}>{formatCount(row.waiting)}</td>
      <td>{row.refused === null ? '—' : formatCount(row.refused)}</td>
      {props.canChange && (
        <td>
          <form
            className="limit-form"
            onSubmit={(event) => {
              event.preventDefault();
              void props.onChange({ cluster, integration: row.integration, limit: limitOf(kind, value, startsPerSecond) }, reason);
            }}
          >
            <select aria-label={`Kind of limit for ${row.integration}`} value={kind} onChange={(event) => setKind(event.target.value as Kind)}>
              <option value="maxInFlight">tasks</option>
              <option value="shareOfCapacity">share (0-1]</option>
              <option value="auto">auto (min-max)</option>
              <option value="off">no limit</option>
              <option value="default">default (rate only)</option>
            </select>
            {kind !== 'off' && kind !== 'default' && (
              <input aria-label={`Limit for ${row.integration}`} inputMode="decimal" value={value} onChange={(event) => setValue(event.target.value)} />
            )}
            <input
              aria-label={`Starts per second for ${row.integration}`}
              placeholder="starts/s (optional)"
              inputMode="decimal"
              value={startsPerSecond}
              onChange={(event) => setStartsPerSecond(event.target.value)}
            />
            <input
              aria-label={`Reason for ${row.integration}`}
              placeholder="reason"
              maxLength={500}
              value={reason}
              onChange={(event) => setReason(event.target.value)}
            />
            <button
              type="submit"
              className="button-primary"
              disabled={props.busy || (kind === 'default' ? startsPerSecond === '' : kind !== 'off' && value === '')}
            >
              Set
            </button>
            <button
              type="button"
              disabled={props.busy || row.source !== 'own'}
              onClick={() => void props.onChange({ cluster, integration: row.integration, limit: null }, reason)}
            >
              Remove
            </button>
          </form>
        </td>
      )}
      <td>
        <button type="button" aria-expanded={props.chartOpen} aria-label={`Chart of ${row.integration}`} onClick={props.onToggleChart}>
          {props.chartOpen ? 'Hide' : 'Show'}
        </button>
      </td>
    </tr>
  );
}

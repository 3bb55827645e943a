import { useCallback, useMemo } from 'react';
import type { IntegrationHealth, IntegrationHealthView } from '../../api/types';
import { ErrorNotice } from '../../components/ErrorNotice';
import { TimeChart, type ChartSeries } from '../../charts/TimeChart';
import { seriesColour } from '../../charts/palette';
import { usePolled } from '../../hooks/usePolled';
import { useSession } from '../../session';
import { formatCount, formatMs, formatShare } from '../../format';

/** The figures come in 10-second slots, as the latency series. */
const refreshIntervalMs = 5000;

/**
 * Each integration against its own recent past, both clusters together: a bank slow for both
 * clusters leaves the candidate/baseline ratio near 1, so the ratio alone cannot say it.
 */
export function IntegrationTrouble() {
  const { client } = useSession();
  const load = useCallback((signal: AbortSignal) => client.get<IntegrationHealthView>('/latency/integrations', signal), [client]);
  const { data, error } = usePolled(load, refreshIntervalMs);
  if (!data) return error === undefined ? <p className="muted">Loading the integrations…</p> : <ErrorNotice error={error} action="Loading the integrations" />;
  return (
    <>
      <ErrorNotice error={error} action="Refreshing the integrations" />
      <TroubleSummary view={data} />
      {data.integrations.length > 0 && <IntegrationTable view={data} />}
      <HiddenNote view={data} />
      {data.integrations.length > 0 && (
        <div className="integration-charts">
          <IntegrationCharts view={data} />
        </div>
      )}
    </>
  );
}

function TroubleSummary({ view }: { view: IntegrationHealthView }) {
  const { rule } = view;
  const reasons = view.integrations.flatMap((item) => item.verdict.reasons);
  const recent = minutes(rule.recentMs);
  if (view.integrations.length === 0) return <p className="muted">No task has finished in the last {minutes(rule.recentMs + rule.previousMs)}.</p>;
  if (reasons.length === 0)
    return (
      <p className="trouble-none">
        No integration is in trouble: none has a p99 over the last {recent} {rule.p99RatioAtLeast}× its previous {minutes(rule.previousMs)}, or{' '}
        {formatShare(rule.errorShareAtLeast, 0)} errors.
      </p>
    );
  return (
    <div className="notice notice-warning trouble-list" role="status">
      <strong>In trouble over the last {recent}:</strong>
      <ul>
        {reasons.map((reason) => (
          <li key={reason}>{reason}</li>
        ))}
      </ul>
    </div>
  );
}

function IntegrationTable({ view }: { view: IntegrationHealthView }) {
  const recent = minutes(view.rule.recentMs);
  const previous = minutes(view.rule.previousMs);
  return (
    <div className="table-scroll">
      <table className="table integration-table">
        <caption className="muted">
          Both clusters together. The last {recent} against the previous {previous}: its typical p99 there is the median of its 10-second p99s. Judged from{' '}
          {view.rule.minTasks} tasks.
        </caption>
        <thead>
          <tr>
            <th scope="col">Integration</th>
            <th scope="col" className="numeric">
              p50
            </th>
            <th scope="col" className="numeric">
              p99
            </th>
            <th scope="col" className="numeric">
              typical p99 previous {previous}
            </th>
            <th scope="col" className="numeric">
              Errors
            </th>
            <th scope="col" className="numeric">
              Errors previous {previous}
            </th>
          </tr>
        </thead>
        <tbody>
          {view.integrations.map((item) => (
            <IntegrationRow key={item.integration} item={item} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function IntegrationRow({ item }: { item: IntegrationHealth }) {
  const { verdict, recent, previous } = item;
  const tag =
    verdict.state === 'trouble' ? (
      <span className="tag tag-warning">⚠ in trouble</span>
    ) : verdict.state === 'ok' ? (
      <span className="tag tag-ok">ok</span>
    ) : (
      <span className="tag tag-info">too few tasks</span>
    );
  return (
    <tr className={verdict.state === 'trouble' ? 'row-warning' : undefined} data-integration={item.integration}>
      <th scope="row">
        {item.integration}
        {tag}
      </th>
      <td className="numeric">{formatMs(recent.p50Ms)}</td>
      <td className="numeric">
        {formatMs(recent.p99Ms)}
        {verdict.p99Ratio !== null && <span className="stat-note"> {verdict.p99Ratio.toFixed(1)}×</span>}
      </td>
      <td className="numeric">{formatMs(previous.p99Ms)}</td>
      <td className="numeric">{errorFigure(recent)}</td>
      <td className="numeric">{errorFigure(previous)}</td>
    </tr>
  );
}

function HiddenNote({ view }: { view: IntegrationHealthView }) {
  if (view.hiddenIntegrations === 0) return null;
  const inTrouble = view.hiddenInTrouble === 0 ? 'none in trouble' : `${view.hiddenInTrouble} in trouble`;
  return (
    <p className="muted hidden-integrations">
      {view.hiddenIntegrations} more {view.hiddenIntegrations === 1 ? 'integration' : 'integrations'} not shown ({inTrouble}): the least busy.
    </p>
  );
}

function IntegrationCharts({ view }: { view: IntegrationHealthView }) {
  const charts = useMemo(() => chartData(view), [view]);
  return (
    <div className="chart-grid">
      <TimeChart title="p99 by integration" series={charts.series} timesUnixMs={charts.timesUnixMs} values={charts.p99} formatValue={formatMs} />
      <TimeChart
        title="Error share by integration"
        series={charts.series}
        timesUnixMs={charts.timesUnixMs}
        values={charts.errorShare}
        formatValue={formatShareValue}
        minYMax={0.1}
      />
    </div>
  );
}

/** A function made once: a new one each render would make the chart build itself again. */
const formatShareValue = (share: number) => formatShare(share);

function chartData(view: IntegrationHealthView) {
  // In name order, as the ratio charts: a bank keeps its colour, and the charts keep their series while the table reorders.
  const integrations = [...view.integrations].sort((a, b) => a.integration.localeCompare(b.integration));
  const slots = integrations[0]?.slots ?? [];
  // Slots before the first finished task (a fleet that just started) would only stretch the time axis.
  const firstBusy = slots.findIndex((_slot, i) => integrations.some((item) => item.slots[i]?.errorShare !== null));
  const from = Math.max(0, firstBusy);
  return {
    timesUnixMs: slots.slice(from).map((slot) => slot.startUnixMs + (view.slotSeconds * 1000) / 2),
    series: integrations.map((item, i): ChartSeries => ({ label: item.integration, colour: seriesColour(i) })),
    p99: integrations.map((item) => item.slots.slice(from).map((slot) => slot.p99Ms)),
    errorShare: integrations.map((item) => item.slots.slice(from).map((slot) => slot.errorShare)),
  };
}

function errorFigure(figures: { tasks: number; errors: number }): string {
  const all = figures.tasks + figures.errors;
  return all === 0 ? '—' : `${formatShare(figures.errors / all)} of ${formatCount(all)}`;
}

function minutes(ms: number): string {
  return ms % 60_000 === 0 ? (ms === 60_000 ? 'minute' : `${ms / 60_000} minutes`) : `${Math.round(ms / 1000)} s`;
}

import { useCallback, useMemo } from 'react';
import type { LimitSeriesView } from '../../api/types';
import { ErrorNotice } from '../../components/ErrorNotice';
import { TimeChart, type ChartSeries } from '../../charts/TimeChart';
import { usePolled } from '../../hooks/usePolled';
import { useSession } from '../../session';
import { formatCount, formatMs } from '../../format';

/** The series come in 10-second slots: asking more often would rarely show anything new. */
const refreshIntervalMs = 5000;
const seriesMinutes = 15;

const taskSeries: ChartSeries[] = [
  { label: 'limit', colour: '#5b6b82', dash: [6, 4] },
  { label: 'in flight', colour: '#1f77b4' },
  { label: 'waiting', colour: '#ff7f0e' },
  { label: 'refused / 10 s', colour: '#d62728' },
];
const latencySeries: ChartSeries[] = [
  // Only slots in which tasks ended have a run time: dots, so that a lone slot shows.
  { label: 'p50 (auto limit’s signal)', colour: '#2ca02c', points: true },
  { label: 'p99', colour: '#9467bd', dash: [6, 4], points: true },
];
/** Functions made once: a new one each render would make the chart build itself again. */
const formatTasks = (value: number) => formatCount(Math.round(value));
const formatLatency = (ms: number) => formatMs(ms);

/**
 * One integration in one cluster over the last 15 minutes: its limit against the tasks in flight,
 * waiting and refused at it, and the run time that an auto limit follows.
 */
export function LimitChart({ cluster, integration }: { cluster: string; integration: string }) {
  const { client } = useSession();
  const load = useCallback(
    (signal: AbortSignal) =>
      client.get<LimitSeriesView>(`/limits/${encodeURIComponent(cluster)}/${encodeURIComponent(integration)}/series?minutes=${seriesMinutes}`, signal),
    [client, cluster, integration],
  );
  const series = usePolled(load, refreshIntervalMs);
  const charts = useMemo(() => (series.data ? chartData(series.data) : undefined), [series.data]);
  const id = `limit-chart-${cluster}-${integration}`.replace(/[^A-Za-z0-9_-]/g, '_');
  return (
    <div className="limit-charts" data-testid={id}>
      {series.error !== undefined && <ErrorNotice error={series.error} action={`Loading the series of ${integration}`} />}
      {charts && (
        <>
          <p className="chart-note" data-testid={`${id}-summary`}>
            Last {seriesMinutes} min: {charts.summary}
          </p>
          <div className="chart-grid">
            <TimeChart
              title={`${integration} on ${cluster}: tasks`}
              series={taskSeries}
              timesUnixMs={charts.timesUnixMs}
              values={charts.tasks}
              formatValue={formatTasks}
              heightPx={160}
              minYMax={1}
            />
            <TimeChart
              title={`${integration} on ${cluster}: run time`}
              series={latencySeries}
              timesUnixMs={charts.timesUnixMs}
              values={charts.latency}
              formatValue={formatLatency}
              heightPx={160}
            />
          </div>
        </>
      )}
    </div>
  );
}

function chartData(view: LimitSeriesView) {
  // Slots before the first sample or task (a control plane that just started) would only stretch the time axis.
  const first = view.points.findIndex((p) => p.inFlight !== null || p.tasks > 0 || p.refused > 0);
  const points = first < 0 ? view.points : view.points.slice(first);
  const peak = (values: (number | null)[]) => values.reduce<number | null>((max, value) => (value === null ? max : Math.max(max ?? 0, value)), null);
  const inFlight = points.map((p) => p.inFlight);
  const waiting = points.map((p) => p.waiting);
  const limits = points.map((p) => p.limitInFlight).filter((limit): limit is number => limit !== null);
  const refused = points.reduce((sum, p) => sum + p.refused, 0);
  const lastLimit = limits.at(-1);
  return {
    timesUnixMs: points.map((p) => p.startUnixMs + (view.slotSeconds * 1000) / 2),
    tasks: [points.map((p) => p.limitInFlight), inFlight, waiting, points.map((p) => (p.inFlight === null && p.refused === 0 ? null : p.refused))],
    latency: [points.map((p) => p.p50Ms), points.map((p) => p.p99Ms)],
    summary:
      `peak in flight ${formatCount(peak(inFlight))}` +
      `${lastLimit === undefined ? ' (no limit)' : ` (limit ${formatCount(lastLimit)})`}, ` +
      `peak waiting ${formatCount(peak(waiting))}, refused ${formatCount(refused)}`,
  };
}

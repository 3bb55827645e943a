import { useCallback, useMemo } from 'react';
import type { LatencySeries } from '../../api/types';
import { isApiError } from '../../api/client';
import { ErrorNotice } from '../../components/ErrorNotice';
import { TimeChart, type ChartSeries } from '../../charts/TimeChart';
import { clusterColours, seriesColour } from '../../charts/palette';
import { usePolled } from '../../hooks/usePolled';
import { useSession } from '../../session';
import { formatMs, formatRate, formatRatio } from '../../format';

/** The series come in 10-second slots: asking more often would rarely show anything new. */
const refreshIntervalMs = 5000;
const seriesWindow = '10m';

type ChartData = ReturnType<typeof chartData>;
export type LatencyCharts = { data: ChartData | undefined; slotSeconds: number; error: unknown };

/** GET /latency/series, polled, shaped for the charts. */
export function useLatencyCharts(): LatencyCharts {
  const { client } = useSession();
  const load = useCallback((signal: AbortSignal) => client.get<LatencySeries>(`/latency/series?window=${seriesWindow}`, signal), [client]);
  const { data, error } = usePolled(load, refreshIntervalMs);
  const charts = useMemo(() => (data ? chartData(data) : undefined), [data]);
  return { data: charts, slotSeconds: data?.slotSeconds ?? 10, error };
}

/**
 * The latency ratio candidate/baseline per integration (p50 and p95): above 1 means tasks run
 * slower on the parallel cluster, the figure that decides whether to go on.
 */
export function RatioCharts({ charts }: { charts: LatencyCharts }) {
  const { data } = charts;
  if (!data) return <ChartsPending charts={charts} />;
  return (
    <div className="chart-grid">
      <TimeChart
        title="Latency ratio p50 (candidate / baseline)"
        series={data.integrationSeries}
        timesUnixMs={data.timesUnixMs}
        values={data.ratioP50}
        formatValue={formatRatio}
        referenceValue={1}
        minYMax={1.5}
      />
      <TimeChart
        title="Latency ratio p95 (candidate / baseline)"
        series={data.integrationSeries}
        timesUnixMs={data.timesUnixMs}
        values={data.ratioP95}
        formatValue={formatRatio}
        referenceValue={1}
        minYMax={1.5}
      />
    </div>
  );
}

/**
 * Latency and throughput of each cluster. The latency compares like with like: only the
 * integrations both clusters ran, the candidate weighted to the baseline's mix.
 */
export function ClusterCharts({ charts }: { charts: LatencyCharts }) {
  const { data } = charts;
  if (!data) return <ChartsPending charts={charts} />;
  return (
    <>
      <MixNote mix={data.mix} />
      <div className="chart-grid">
        <TimeChart
          title="Latency by cluster, same integrations"
          series={latencySeries}
          timesUnixMs={data.timesUnixMs}
          values={data.latency}
          formatValue={formatMs}
        />
        <TimeChart
          title="Tasks and errors per second"
          series={throughputSeries}
          timesUnixMs={data.timesUnixMs}
          values={data.throughput}
          formatValue={formatRate}
        />
      </div>
    </>
  );
}

/** Says plainly when the clusters ran different integrations, and what the latency chart leaves out. */
function MixNote({ mix }: { mix: LatencySeries['mix'] }) {
  const onlyOn = [
    mix.baselineOnly.length > 0 ? `only the baseline ran ${names(mix.baselineOnly)}` : null,
    mix.candidateOnly.length > 0 ? `only the candidate ran ${names(mix.candidateOnly)}` : null,
  ].filter((part) => part !== null);
  if (onlyOn.length === 0) return null;
  const compared =
    mix.compared.length === 0
      ? 'They ran no integration in common, so their latency is not compared.'
      : `The latency chart compares ${names(mix.compared)} only, the candidate weighted to the baseline's mix.`;
  return (
    <p className="notice notice-warning mix-note">
      The clusters' integration mixes differ: {onlyOn.join('; ')}. {compared} Tasks and errors count every integration.
    </p>
  );
}

/** At most five names, then how many more: a fleet may run hundreds of integrations. */
function names(list: string[]): string {
  const shown = list.slice(0, 5).join(', ');
  return list.length > 5 ? `${shown} and ${list.length - 5} more` : shown;
}

function ChartsPending({ charts }: { charts: LatencyCharts }) {
  const { error } = charts;
  if (isApiError(error) && error.code === 'HR_ERR_NOT_FOUND')
    return <p className="muted">This control plane has no latency series (GET /api/v1/latency/series): —</p>;
  if (error !== undefined) return <ErrorNotice error={error} action="Loading the latency series" />;
  return <p className="muted">Loading the latency series…</p>;
}

/** Says why the charts are empty, or that refreshing them failed (the last ones stay shown). */
export function ChartsNote({ charts }: { charts: LatencyCharts }) {
  if (charts.data && charts.error !== undefined) return <ErrorNotice error={charts.error} action="Refreshing the latency series" />;
  if (charts.data && charts.data.timesUnixMs.length === 0)
    return (
      <p className="muted">No task has finished in the last 10 minutes: the charts fill in as workers finish tasks ({charts.slotSeconds}-second slots).</p>
    );
  return null;
}

const latencySeries: ChartSeries[] = [
  { label: 'baseline p50', colour: clusterColours.baseline },
  { label: 'baseline p95', colour: clusterColours.baseline, dash: [6, 4] },
  { label: 'candidate p50', colour: clusterColours.candidate },
  { label: 'candidate p95', colour: clusterColours.candidate, dash: [6, 4] },
];

const throughputSeries: ChartSeries[] = [
  { label: 'baseline tasks', colour: clusterColours.baseline },
  { label: 'candidate tasks', colour: clusterColours.candidate },
  { label: 'baseline errors', colour: clusterColours.baseline, dash: [2, 3] },
  { label: 'candidate errors', colour: clusterColours.candidate, dash: [2, 3] },
];

function chartData(series: LatencySeries) {
  // Slots before the first finished task (a fleet that just started) would only stretch the time axis.
  const firstBusy = series.slots.findIndex((slot) => slot.baseline.tasksPerSecond > 0 || slot.candidate.tasksPerSecond > 0);
  const slots = firstBusy === -1 ? [] : series.slots.slice(firstBusy);
  const integrations = [...new Set(slots.flatMap((slot) => Object.keys(slot.integrations)))].sort();
  // A point at the middle of its slot: it stands for the whole slot.
  const timesUnixMs = slots.map((slot) => slot.startUnixMs + (series.slotSeconds * 1000) / 2);
  return {
    timesUnixMs,
    integrationSeries: integrations.map((name, i): ChartSeries => ({ label: name, colour: seriesColour(i) })),
    ratioP50: integrations.map((name) => slots.map((slot) => slot.integrations[name]?.p50 ?? null)),
    ratioP95: integrations.map((name) => slots.map((slot) => slot.integrations[name]?.p95 ?? null)),
    latency: [
      slots.map((slot) => slot.sameMix.baselineP50Ms),
      slots.map((slot) => slot.sameMix.baselineP95Ms),
      slots.map((slot) => slot.sameMix.candidateP50Ms),
      slots.map((slot) => slot.sameMix.candidateP95Ms),
    ],
    mix: series.mix,
    throughput: [
      slots.map((slot) => slot.baseline.tasksPerSecond),
      slots.map((slot) => slot.candidate.tasksPerSecond),
      slots.map((slot) => slot.baseline.errorsPerSecond),
      slots.map((slot) => slot.candidate.errorsPerSecond),
    ],
  };
}

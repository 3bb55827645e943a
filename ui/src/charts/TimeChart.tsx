import { useEffect, useMemo, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  colour: string;
  /** Dash pattern in px, e.g. [6, 4]. */
  dash?: number[];
  /** Marks each figure with a dot: for sparse series, whose lone figures draw no line. */
  points?: boolean;
}

/**
 * A time-series line chart (uPlot: canvas, so dozens of series stay smooth). `times` are Unix
 * milliseconds; `values[i]` belongs to `series[i]`, null where there is no figure. The plot is
 * built again only when the series change; new data (memoised by the caller) is handed to it.
 */
export function TimeChart(props: {
  title: string;
  series: ChartSeries[];
  timesUnixMs: number[];
  values: (number | null)[][];
  formatValue(value: number): string;
  heightPx?: number;
  /** A dashed reference line, e.g. ratio 1 = "no difference". */
  referenceValue?: number;
  /** Lowest upper bound of the y axis, so that flat series are not stretched. */
  minYMax?: number;
}) {
  const container = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const { title, series, formatValue, referenceValue, minYMax } = props;
  const heightPx = props.heightPx ?? 220;
  const seriesKey = JSON.stringify(series);
  const { timesUnixMs, values } = props;
  const data = useMemo(() => [timesUnixMs.map((ms) => ms / 1000), ...values] as uPlot.AlignedData, [timesUnixMs, values]);
  const latestData = useRef(data);
  latestData.current = data;

  useEffect(() => {
    const element = container.current;
    if (!element) return;
    const options: uPlot.Options = {
      width: Math.max(200, element.clientWidth),
      height: heightPx,
      series: [
        { value: (_u, seconds) => (seconds == null ? '—' : clockTime(seconds, true)) },
        ...series.map((s) => ({
          label: s.label,
          stroke: s.colour,
          width: 1.5,
          ...(s.dash ? { dash: s.dash } : {}),
          spanGaps: false,
          points: { show: s.points ?? false },
          value: (_u: uPlot, value: number | null) => (value == null ? '—' : formatValue(value)),
        })),
      ],
      scales: {
        x: { time: true },
        y: { range: (_u, min, max) => [Math.min(0, min ?? 0), Math.max(minYMax ?? 0, referenceValue ?? 0, (max ?? 1) * 1.1)] },
      },
      // x: room for an hh:mm:ss label between ticks.
      axes: [
        { space: 90, values: (_u, ticksSeconds, _axis, _space, incrementSeconds) => ticksSeconds.map((tick) => clockTime(tick, incrementSeconds < 60)) },
        { values: (_u, ticks) => ticks.map((tick) => formatValue(tick)), font: axisFont, size: (_u, labels) => yAxisWidthPx(labels) },
      ],
      // A dashed series gets a dashed swatch: p50 and p95 of one cluster share a colour.
      legend: { show: true, live: true, markers: { dash: (_u, seriesIndex) => (series[seriesIndex - 1]?.dash ? 'dashed' : 'solid') } },
      cursor: { drag: { x: false, y: false } },
      hooks:
        referenceValue === undefined
          ? {}
          : {
              // The reference line is drawn, not a series: it has no legend entry and no tooltip value.
              draw: [
                (u) => {
                  const y = Math.round(u.valToPos(referenceValue, 'y', true));
                  const { ctx } = u;
                  ctx.save();
                  ctx.strokeStyle = '#8a94a6';
                  ctx.setLineDash([4, 4]);
                  ctx.lineWidth = 1;
                  ctx.beginPath();
                  ctx.moveTo(u.bbox.left, y);
                  ctx.lineTo(u.bbox.left + u.bbox.width, y);
                  ctx.stroke();
                  ctx.restore();
                },
              ],
            },
    };
    const chart = new uPlot(options, latestData.current, element);
    plot.current = chart;
    const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(200, element.clientWidth), height: heightPx }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      chart.destroy();
      plot.current = null;
    };
    // seriesKey stands for `series` (a new array each render with the same content).
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [seriesKey, heightPx, formatValue, referenceValue, minYMax]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  // The figures drawn, for readers of the DOM (the canvas holds none): a test waits for them.
  const points = useMemo(() => values.reduce((sum, one) => sum + one.filter((value) => value !== null).length, 0), [values]);

  return (
    <figure className="chart" data-points={points}>
      <figcaption className="chart-title">{title}</figcaption>
      <div ref={container} className="chart-plot" role="img" aria-label={title} />
    </figure>
  );
}

/** Set on the y axis and used to measure its labels, so that the measure is of what is drawn. */
const axisFont = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif';
/** uPlot's tick length and gap between tick and label, plus a few px of margin at the left edge. */
const yAxisTicksAndGapPx = 10 + 5 + 6;
let measuring: CanvasRenderingContext2D | null = null;

/**
 * Width of the y axis: its widest label and the ticks. A fixed width clipped labels such as
 * "1000 ms" at the canvas's left edge.
 */
function yAxisWidthPx(labels: string[] | null | undefined): number {
  measuring ??= document.createElement('canvas').getContext('2d');
  if (!measuring || !labels || labels.length === 0) return 64;
  measuring.font = axisFont;
  const widestPx = Math.max(...labels.map((label) => measuring!.measureText(label).width));
  return Math.ceil(widestPx) + yAxisTicksAndGapPx;
}

/** 24-hour clock time, as the rest of the UI shows times. */
function clockTime(unixSeconds: number, withSeconds: boolean): string {
  return new Date(unixSeconds * 1000).toLocaleTimeString('en-GB', {
    hour12: false,
    hour: '2-digit',
    minute: '2-digit',
    ...(withSeconds ? { second: '2-digit' } : {}),
  });
}

import { failedTasks, type ComparedFigure, type GcSemiSpaceResult, type SemiSpaceRun } from './gc-semispace';
import { formatMachine } from './report/machine';
import { formatSpread } from './report/stats';
import { markdownTable } from './report/table';

/** The summary's columns: a heading and the digits each figure is shown with. */
const columns: readonly [ComparedFigure, string, number][] = [
  ['gcPercentOfWall', 'GC % of wall', 1],
  ['scavengePercentOfWall', 'scavenge %', 1],
  ['markSweepPercentOfWall', 'mark-sweep %', 1],
  ['scavengesPerSecond', 'scavenges/s', 0],
  ['markSweepsPerSecond', 'mark-sweeps/s', 2],
  ['gcPercentOfWallByMetric', 'GC % by the metric', 1],
  ['gcPausesMissedByMetricPercent', 'pauses the metric missed %', 0],
  ['eventLoopUtilizationPercent', 'ELU %', 0],
  ['workerCpuPercentOfCore', 'worker CPU % of core', 0],
  ['handlerMeanMs', 'handler mean ms', 1],
  ['p50Ms', 'p50 ms', 1],
  ['p99Ms', 'p99 ms', 1],
  ['tasksPerSecond', 'tasks/s', 0],
  ['heapUsedMeanMiB', 'heap used mean MiB', 0],
  ['heapUsedMaxMiB', 'heap used max MiB', 0],
];

const ourProcesses = ['balancer', 'generator', 'redis'] as const;

/** "17 / 9 / 4 / 35": the balancer, generator and Redis, then what the machine spent on work not ours. */
function cpuBreakdown(r: SemiSpaceRun): string {
  const ours = ourProcesses.map((name) => r.cpuPercentOfCore[name]);
  const oursInAll = r.workerCpuPercentOfCore + ours.reduce<number>((sum, percent) => sum + (percent ?? 0), 0);
  const notOurs = r.machineCpuPercentOfCore === null ? '?' : Math.max(0, r.machineCpuPercentOfCore - oursInAll).toFixed(0);
  return [...ours.map((percent) => (percent === undefined ? '?' : String(percent))), notOurs].join(' / ');
}

const formatRatio = (ratio: number | null) => (ratio === null ? '-' : `${ratio.toFixed(2)}x`);

export function gcSemiSpaceTables(result: GcSemiSpaceResult): string {
  const [first, second] = result.summaries;
  const summary = markdownTable(
    ['semi-space', ...columns.map(([, heading]) => heading), 'failed or dropped'],
    [
      ...result.summaries.map((s) => [
        `${s.semiSpaceSizeMb} MiB`,
        ...columns.map(([name, , digits]) => formatSpread(s.figures[name], digits)),
        String(s.failedTasks),
      ]),
      [`ratio ${first.semiSpaceSizeMb} ÷ ${second.semiSpaceSizeMb}`, ...columns.map(([name]) => formatRatio(result.ratios[name])), ''],
    ],
  );
  const perRun = markdownTable(
    [
      '#',
      'semi-space',
      'GC %',
      'scavenge %',
      'mark-sweep %',
      'scavenges',
      'mark-sweeps',
      'GC % by the metric',
      'scavenges by the metric',
      'ELU %',
      'worker CPU %',
      'p50 ms',
      'p99 ms',
      'tasks/s',
      'heap used mean / max MiB',
      'CPU % of core: balancer / generator / redis / not ours',
      'failed',
    ],
    result.runs.map((r) => [
      String(r.repetition),
      `${r.semiSpaceSizeMb} MiB`,
      r.gcPercentOfWall.toFixed(1),
      r.gcPercentOfWallByKind.minor.toFixed(1),
      (r.gcPercentOfWallByKind.major + r.gcPercentOfWallByKind.incremental).toFixed(1),
      String(r.gcCountByKind.minor),
      String(r.gcCountByKind.major),
      r.gcPercentOfWallByMetric.toFixed(1),
      String(r.gcCountByKindByMetric.minor),
      r.eventLoopUtilizationPercent.toFixed(0),
      r.workerCpuPercentOfCore.toFixed(0),
      r.load.latency.p50Ms.toFixed(1),
      r.load.latency.p99Ms.toFixed(1),
      r.load.tasksPerSecond.toFixed(0),
      `${r.heapUsedMeanMiB.toFixed(0)} / ${r.heapUsedMaxMiB.toFixed(0)}`,
      cpuBreakdown(r),
      String(failedTasks(r.load)),
    ]),
  );
  const limits = result.summaries
    .map(
      (s) =>
        `${s.semiSpaceSizeMb} MiB: heap limit ${s.heapLimitMiB.toFixed(0)} MiB, young generation (two semi-spaces) grown to ${s.newSpaceMaxMiB.toFixed(0)} MiB`,
    )
    .join('; ');
  const repetitions = result.settings.repetitions;
  return [
    `Median over ${repetitions} run${repetitions === 1 ? '' : 's'} of each size (min..max); the sizes alternated. GC figures count every main-thread pause (perf_hooks); "by the metric" is what \`nodejs_gc_duration_seconds\` showed. Mark-sweep = mark-sweep-compact pauses plus incremental marking steps.`,
    '',
    summary,
    '',
    `As the worker reported them: ${limits}. Node without heap flags: heap limit ${result.nodeDefaultHeapLimitMiB.toFixed(0)} MiB.`,
    '',
    'Each run, in the order they ran (GC counts over the window):',
    '',
    perRun,
  ].join('\n');
}

export function gcSemiSpaceMarkdown(result: GcSemiSpaceResult): string {
  const s = result.settings;
  return `## gc-semispace

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root)
- Setup: 1 worker (cluster candidate, max parallelism ${s.maxParallelism}, the demo handlers through \`bench/src/fleet/gc-observing-handlers.ts\`, \`--max-semi-space-size-mb ${s.semiSpaceSizesMb[0]}\` or \`${s.semiSpaceSizesMb[1]}\`, \`--metrics-port 0\`) behind 1 balancer (\`--candidate-percent 100\`), each its own process and both started afresh for every run; the load generator is a third process. Everything shares the ${result.machine.nproc} cores. Node 20's default semi-space is 16 MiB on 64-bit: a worker at the default has the heap limit of Node without flags, shown below the table.
- Load: open loop, ${s.load.tasksPerSecond} tasks/s through the balancer, payload \`{"sleepMs": ${s.load.taskSleepMs}, "allocateKb": ${s.load.allocateKb}}\`: each task builds a ${s.load.allocateKb} KiB JSON answer, parses it, reshapes every record and serialises the result, and holds all of it while it sleeps ${s.load.taskSleepMs} ms. Latency counts from when each task was due.
- Runs: ${s.repetitions} of each size, alternating; each ${s.leadInMs} ms of load before a ${s.windowMs} ms window in which the worker's \`/metrics\` is read every ${s.scrapeIntervalMs} ms. GC % = main-thread GC pause time over the window's wall time (by kind: minor = scavenge, major = mark-sweep-compact), from a perf_hooks observer in the worker (in that handlers module) that counts every pause; "by the metric" = the rise of \`nodejs_gc_duration_seconds_sum\` over the same window: prom-client records only the first GC of each batch perf_hooks delivers, so it misses pauses that come together; ELU = \`headroom_eventloop_utilization_ratio\` weighted by the time each scrape covers; worker CPU from \`process_cpu_seconds_total\` (GC helper threads included); handler mean from \`headroom_worker_task_duration_seconds\`; heap used from \`nodejs_heap_size_used_bytes\` at each scrape.

${gcSemiSpaceTables(result)}
`;
}

import { minReferenceTasksToJudge, type ParallelismResult, type ParallelismRun, type PooledLatency } from './parallelism';
import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { failedCalls, formatSpread, type Spread } from './report/stats';
import { markdownTable } from './report/table';

const ratio = (value: Spread) => `${formatSpread(value)}x`;
/** "1.04x (0.97..1.12)": the pooled ratio, then its range over the repetitions' own ratios. */
const pooledRatio = (latency: PooledLatency) =>
  `${latency.p50Ratio.toFixed(2)}x${latency.p50RatioByRepetition.min === latency.p50RatioByRepetition.max ? '' : ` (${latency.p50RatioByRepetition.min.toFixed(2)}..${latency.p50RatioByRepetition.max.toFixed(2)})`}`;

/** "12 / 9 / 3 / 40": the bank simulator, the generator, Redis, then what the machine spent on work not ours. */
function cpuBreakdown(r: ParallelismRun): string {
  const ours = ['bank-sim', 'generator', 'redis'].map((name) => r.cpuPercentOfCore[name]);
  const oursInAll = r.workerCpuPercentOfCore + ours.reduce<number>((sum, percent) => sum + (percent ?? 0), 0);
  const notOurs = r.machineCpuPercentOfCore === null ? '?' : Math.max(0, r.machineCpuPercentOfCore - oursInAll).toFixed(0);
  return [...ours.map((percent) => (percent === undefined ? '?' : String(percent))), notOurs].join(' / ');
}

export function parallelismTables(result: ParallelismResult): string {
  const integrations = result.settings.integrationMix.map((entry) => entry.name);
  const summary = markdownTable(
    [
      'max parallelism N',
      'tasks/s',
      'throughput ÷ N=1',
      'p50 ms',
      'p99 ms',
      'p50 ÷ N=1',
      'p99 ÷ N=1',
      'GC % of wall',
      'ELU %',
      'worker CPU % of core',
      'heap used max MiB',
      'failed',
    ],
    result.levels.map((level) => [
      String(level.maxParallelism),
      formatSpread(level.tasksPerSecond, 1),
      ratio(level.throughputRatio),
      level.all.p50Ms.toFixed(0),
      level.all.p99Ms.toFixed(0),
      pooledRatio(level.all),
      `${level.all.p99Ratio.toFixed(2)}x`,
      formatSpread(level.gcPercentOfWall, 1),
      formatSpread(level.eventLoopUtilizationPercent, 0),
      formatSpread(level.workerCpuPercentOfCore, 0),
      formatSpread(level.heapUsedMaxMiB, 0),
      String(level.failedTasks),
    ]),
  );
  const perIntegration = markdownTable(
    ['N', ...integrations.flatMap((name) => [`${name} p50 ms`, `${name} p50 ÷ N=1`, `${name} p99 ÷ N=1`])],
    result.levels.map((level) => [
      String(level.maxParallelism),
      ...integrations.flatMap((name) => {
        const figures = level.byIntegration[name];
        if (!figures) return ['-', '-', '-'];
        return [
          `${figures.p50Ms.toFixed(0)} (${figures.tasks} tasks)`,
          `${pooledRatio(figures)}${figures.judged ? '' : ' *'}`,
          `${figures.p99Ratio.toFixed(2)}x`,
        ];
      }),
    ]),
  );
  const perRun = markdownTable(
    ['#', 'N', 'tasks/s', 'p50 ms', 'p99 ms', 'GC %', 'ELU %', 'worker CPU %', 'CPU % of core: bank sim / generator / redis / not ours', 'failed'],
    result.runs.map((r) => [
      String(r.repetition),
      String(r.maxParallelism),
      r.tasksPerSecond.toFixed(1),
      r.latency.p50Ms.toFixed(0),
      r.latency.p99Ms.toFixed(0),
      r.gcPercentOfWall.toFixed(1),
      r.eventLoopUtilizationPercent.toFixed(0),
      r.workerCpuPercentOfCore.toFixed(0),
      cpuBreakdown(r),
      String(failedCalls(r)),
    ]),
  );
  const repetitions = result.settings.repetitions;
  return [
    `Rates: median over ${repetitions} repetition${repetitions === 1 ? '' : 's'} (min..max), the levels alternating; throughput ÷ N=1 is taken within each repetition. Latency: successful tasks only, from sending to the answer, every repetition's tasks pooled; p50 ÷ N=1 is pooled over pooled, with the range of the repetitions' own ratios in brackets.`,
    '',
    summary,
    '',
    `By integration (tasks = successful tasks of all repetitions; * = fewer than ${minReferenceTasksToJudge} tasks at N=1: shown, not judged):`,
    '',
    perIntegration,
    '',
    'Each run, in the order they ran:',
    '',
    perRun,
    '',
    goalsTable(result.goals),
  ].join('\n');
}

export function parallelismMarkdown(result: ParallelismResult): string {
  const s = result.settings;
  const mix = s.integrationMix.map(({ name, weight }) => `${name}:${weight}`).join(', ');
  return `## parallelism

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root)
- Setup: the bank simulator (\`node sim/dist/src/bank/cli.js --time-scale ${s.bankTimeScale} --seed ${s.bankSeed}\`) and the workers (cluster candidate, \`--max-parallelism N\`, the bank handlers \`sim/dist/src/handlers/bank.js\` through \`bench/src/fleet/gc-observing-handlers.ts\`, \`--metrics-port 0\`), one worker per level, each its own process, all started once; a load-generator process for each worker. One level runs at a time, and the next starts when the last tasks of the one before have ended. Everything shares the ${result.machine.nproc} cores.
- Time scale ${s.bankTimeScale}: ${result.bankTimeScaleWhy}.
- Load: closed loop straight to Worker.Execute with exactly N tasks in flight (the balancer is not part of this measurement), integrations in a fixed cycle of ${mix} (the demo's weights), each task one account of the task's key. ${s.leadInMs} ms of load first, then a window of ${s.referenceWindowMs} ms at N=${s.levels[0]} (it completes the fewest tasks, and every ratio divides by it) and ${s.windowMs} ms at the other levels.
- Worker figures over the window: GC % = every main-thread GC pause (perf_hooks, in the worker) over wall time; ELU = \`headroom_eventloop_utilization_ratio\`; worker CPU from \`process_cpu_seconds_total\`; heap from \`nodejs_heap_size_used_bytes\`.

${parallelismTables(result)}
`;
}

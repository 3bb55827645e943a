import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { failedCalls, formatSpread } from './report/stats';
import { markdownTable } from './report/table';
import type { RoutingResult, RoutingWindow, SleepProfile } from './routing';

const percent = (share: number) => `${Math.round(share * 100)}%`;

/** "3 / 12 / 8 / 5": this policy's balancers together, the generator, all workers together, Redis. */
function cpuBreakdown(w: RoutingWindow): string {
  const sumOf = (prefix: string) => Object.entries(w.cpuPercentOfCore).reduce((sum, [name, value]) => (name.startsWith(prefix) ? sum + value : sum), 0);
  return [sumOf(w.policy), w.cpuPercentOfCore.generator ?? '?', sumOf('worker-'), w.cpuPercentOfCore.redis ?? '?'].join(' / ');
}

export function routingTables(result: RoutingResult): string {
  const summary = markdownTable(
    ['utilisation', 'policy', 'tasks', 'p50 ms', 'p99 ms', 'p99 ÷ least-loaded', 'p99 ms by window', 'p99 ÷ least-loaded by window', 'tasks on slow workers %', 'in flight per fast worker', 'in flight per slow worker', 'in-flight spread (max − min)', 'failed or dropped'],
    result.summaries.map((s) => [
      `${percent(s.utilisation)} (${s.offeredTasksPerSecond.toFixed(0)} tasks/s)`,
      s.policy,
      String(s.tasks),
      s.pooledP50Ms.toFixed(0),
      s.pooledP99Ms.toFixed(0),
      `${s.pooledP99OverLeastLoaded.toFixed(2)}x`,
      formatSpread(s.p99Ms, 0),
      `${formatSpread(s.p99OverLeastLoaded)}x`,
      formatSpread(s.slowWorkerTaskShare, 1),
      formatSpread(s.meanInflightFast),
      formatSpread(s.meanInflightSlow),
      formatSpread(s.inflightSpread),
      String(s.failedTasks),
    ]),
  );
  const perWindow = markdownTable(
    ['#', 'utilisation', 'policy', 'tasks/s', 'p50 ms', 'p99 ms', 'slow workers ran %', 'in flight fast / slow', 'spread', 'CPU % of core: balancers / generator / workers / redis', 'failed'],
    result.windows.map((w) => [
      String(w.repetition),
      percent(w.utilisation),
      w.policy,
      w.tasksPerSecond.toFixed(0),
      w.latency.p50Ms.toFixed(0),
      w.latency.p99Ms.toFixed(0),
      (w.slowWorkerTaskShare * 100).toFixed(1),
      `${w.inflight.meanFast.toFixed(2)} / ${w.inflight.meanSlow.toFixed(2)}`,
      w.inflight.meanSpread.toFixed(2),
      cpuBreakdown(w),
      String(failedCalls(w)),
    ]),
  );
  const repetitions = result.settings.repetitions;
  return [
    `${repetitions} repetition${repetitions === 1 ? '' : 's'}; within each utilisation the policies alternated, in an order rotated every repetition. p50, p99 and p99 ÷ least-loaded: all repetitions' tasks pooled (one window's p99 rests on a handful of tasks); "by window": median (min..max) of the windows' own, the ratio taken within a repetition. Other columns: median (min..max) over the windows. In flight: the ledger's count per worker, read every ${result.settings.inflightSampleIntervalMs} ms and averaged over the window.`,
    '',
    summary,
    '',
    'Each window, in the order they ran:',
    '',
    perWindow,
    '',
    goalsTable(result.goals),
  ].join('\n');
}

const describeSleep = (sleep: SleepProfile) => `median ${sleep.medianMs} ms, sigma ${sleep.sigma}, at most ${sleep.maxMs} ms`;

export function routingMarkdown(result: RoutingResult): string {
  const s = result.settings;
  return `## routing

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root)
- Setup: ${s.fastWorkers.count + s.slowWorkers.count} workers at max parallelism ${s.maxParallelismPerWorker}, each its own process, running \`bench/src/fleet/sleep-handlers.ts\`: every task waits a log-normal time drawn in the worker, ${describeSleep(s.fastWorkers.sleep)} on the ${s.fastWorkers.count} fast workers and ${describeSleep(s.slowWorkers.sleep)} on the ${s.slowWorkers.count} slow ones (4x slower at the median, with a heavy tail). ${s.balancersPerPolicy} balancer processes per policy (\`--policy least-loaded | round-robin | random | power-of-two\`), all ${s.balancersPerPolicy * 4} up the whole run; every policy admits through the ledger, so none over-admits: they differ in which worker they ask for. One load-generator process per policy spreads its calls over that policy's balancers in turn. Everything shares the ${result.machine.nproc} cores.
- Capacity: measured first, ${result.capacityTasksPerSecond.toFixed(0)} tasks/s: a closed loop keeping ${s.capacityProbe.slotsMultiple} times the fleet's slots in flight through the least-loaded balancers, ${s.capacityProbe.warmupMs} ms warm-up then ${s.capacityProbe.durationMs} ms measured (on paper, each worker's slots over its tasks' mean time, ${result.nominalCapacityTasksPerSecond.toFixed(0)} tasks/s; a slot is also held while the task travels and its lease comes back).
- Load: open loop at a share of that capacity, latency from when each task was due; ${s.leadInMs} ms lead-in, then a ${s.windowMs} ms window per policy and utilisation.

${routingTables(result)}
`;
}

import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { failedCalls, formatSpread } from './report/stats';
import { markdownTable } from './report/table';
import { alternativePolicies, clusterOf, headroomPolicy, type PolicySummary, type RoutingResult, type RoutingWindow } from './routing';
import type { TaskTrace } from './load/protocol';

const percent = (share: number) => `${Math.round(share * 100)}%`;
const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(value < 10 ? 1 : 0) : '–');

/** "3 / 12 / 8 / 5 (machine 150)": this policy's balancers together, the generator, the cluster's workers together, Redis; the whole machine. */
function cpuBreakdown(w: RoutingWindow): string {
  const sumOf = (prefix: string) => Object.entries(w.cpuPercentOfCore).reduce((sum, [name, value]) => (name.startsWith(prefix) ? sum + value : sum), 0);
  return `${[sumOf(`${w.policy}`), w.cpuPercentOfCore.generator ?? '?', sumOf('worker-'), w.cpuPercentOfCore.redis ?? '?'].join(' / ')} (${w.machineCpuPercentOfCore ?? '?'})`;
}

/** "180 = 2 + 0 + 150 + 28": latency, balancer queue, worker queue, run, the rest (travel and waiting for a CPU). */
function traceLine(t: TaskTrace): string {
  const rest = t.latencyMs - t.balancerQueueWaitMs - t.workerQueueWaitMs - t.runMs;
  return `${ms(t.latencyMs)} = ${ms(t.balancerQueueWaitMs)} + ${ms(t.workerQueueWaitMs)} + ${ms(t.runMs)} + ${ms(rest)} (${t.integration}, ${t.priority === 'USER_PRESENT' ? 'user' : 'bg'})`;
}

function ratioCell(s: PolicySummary): string {
  return s.policy === headroomPolicy ? `${s.p99Ratio.toFixed(2)}x of best alternative` : `${s.p99Ratio.toFixed(2)}x least-loaded`;
}

export function routingTables(result: RoutingResult): string {
  const summary = markdownTable(
    [
      'load',
      'policy',
      'tasks',
      'p50 ms',
      'p99 ms',
      'p99.9 ms',
      'p99 ratio',
      'user-present p99 ms',
      'background p99 ms',
      'queued p50 / p99 ms',
      'run p99 ms',
      'added p50 / p99 ms',
      'waited in a worker queue',
      'load max ÷ mean',
      'tasks in local queues',
      'queued beside a free slot %',
      'slot held ÷ task ran',
      'p99 ms by window',
      'failed',
    ],
    result.summaries.map((s) => [
      `${percent(s.utilisation)} (${s.offeredTasksPerSecond.toFixed(0)}/s)`,
      s.policy,
      String(s.tasks),
      ms(s.p50Ms),
      ms(s.p99Ms),
      ms(s.p999Ms),
      ratioCell(s),
      ms(s.userPresentP99Ms),
      ms(s.backgroundP99Ms),
      `${ms(s.queuedP50Ms)} / ${ms(s.queuedP99Ms)}`,
      ms(s.runP99Ms),
      `${ms(s.addedP50Ms)} / ${ms(s.addedP99Ms)}`,
      String(s.tasksWaitedInWorker),
      formatSpread(s.loadMaxOverMean),
      `${formatSpread(s.meanLocalQueued, 1)}, peak ${s.peakLocalQueueDepth}`,
      formatSpread(s.queuedBesideFreeSlotShare, 0),
      Number.isFinite(s.slotHeldOverTaskRan.median) ? formatSpread(s.slotHeldOverTaskRan) : '–',
      formatSpread(s.p99MsByWindow, 0),
      String(s.failedTasks),
    ]),
  );
  const traced = markdownTable(
    ['load', 'policy', 'slowest tasks: latency = balancer queue + worker queue + run + the rest (ms)'],
    result.summaries.filter((s) => s.utilisation >= 0.9).map((s) => [percent(s.utilisation), s.policy, s.slowest.slice(0, 3).map(traceLine).join('; ')]),
  );
  const perWindow = markdownTable(
    [
      '#',
      'load',
      'policy',
      'tasks/s',
      'p50 ms',
      'p99 ms',
      'user p99 ms',
      'queued p99 ms',
      'waited in a worker',
      'load max ÷ mean',
      'CPU % of a core: balancers / generator / workers / redis (machine)',
      'failed',
    ],
    result.windows.map((w) => [
      String(w.repetition),
      percent(w.utilisation),
      w.policy,
      w.tasksPerSecond.toFixed(0),
      ms(w.latency.p50Ms),
      ms(w.latency.p99Ms),
      ms(w.latencyByPriority.USER_PRESENT?.p99Ms ?? Number.NaN),
      ms(w.queued.queuedMs.p99Ms),
      String(w.queued.waitedInWorker),
      w.workerLoad.meanMaxOverMeanLoad.toFixed(2),
      cpuBreakdown(w),
      String(failedCalls(w)),
    ]),
  );
  const repetitions = result.settings.repetitions;
  return [
    `${repetitions} repetition${repetitions === 1 ? '' : 's'}; within each load the policies alternated, in an order rotated every repetition. Latency from when each task was due to its answer at the client; p50, p99, p99.9, user-present and background p99 and queued: all repetitions' tasks pooled. p99 ratio: least-loaded's over the best alternative's, an alternative's over least-loaded's. Queued: the balancer's queue wait plus the worker's local queue wait, from each answer's placement. Run: the handler's own time (the placement's run_ms): the p99 no policy can go below. Added: latency minus run, per task: what placing it cost (queues, travel, waiting for a CPU). Load max ÷ mean: per sample, the busiest worker's running + locally queued tasks over the cluster's mean (each worker's own /metrics, every ${result.settings.loadSampleIntervalMs} ms), averaged over the window; median (min..max) over the windows. Tasks in local queues: all the cluster's workers together, time-averaged; peak: the most one worker held. Queued beside a free slot: share of samples in which a worker held a task in its queue while another worker had a free slot. Slot held ÷ task ran (least-loaded only): the ledger's leases over the tasks its workers ran, time-averaged, read together: by Little's law, how much longer the ledger counts a slot taken than the task runs (the dispatch to the worker, the answer back and the release).`,
    '',
    summary,
    '',
    'The slowest tasks at 90% and 100% (of all repetitions), and where their time went:',
    '',
    traced,
    '',
    'Each window, in the order they ran:',
    '',
    perWindow,
    '',
    goalsTable(result.goals),
  ].join('\n');
}

/** The capacity probes with the machine's CPU during each (older records have none). */
function probesLine(result: RoutingResult): string {
  const probes = result.capacityProbes ?? [];
  if (probes.length === 0) return '';
  return `The same probe: ${probes.map((p) => `${p.tasksPerSecond.toFixed(0)} tasks/s through ${p.policy} (machine CPU ${p.machineCpuPercentOfCore ?? '?'}% of a core)`).join(', ')}.`;
}

export function routingMarkdown(result: RoutingResult): string {
  const s = result.settings;
  const factors = Object.entries(s.sleep.factorByIntegration ?? {})
    .map(([name, factor]) => `${name} ${factor}x`)
    .join(', ');
  const mix = s.integrationMix.map(({ name, weight }) => `${name}:${weight}`).join(', ');
  const priorities = s.priorityMix.map(({ priority, weight }) => `${priority}:${weight}`).join(', ');
  return `## routing

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root; \`npm run bench -- routing --smoke\` for the few-second version the tests run)
- Setup: two clusters of ${s.workersPerCluster} workers at max parallelism ${s.maxParallelismPerWorker}, each worker its own process. \`${clusterOf(headroomPolicy)}\`: workers run \`--overflow refuse\` (a task that finds every slot busy is refused, and the balancer tries another), behind 3 Headroom balancers (\`--policy ${headroomPolicy}\`: the shared count of free slots in Redis; no free slot, the task waits in the balancer's priority queue). \`candidate\`: the same workers run \`--overflow queue\` (such a task waits in the worker, first come first served, up to ${s.maxLocalQueuedTasksPerWorker}), behind ${s.balancersPerPolicy} balancers per alternative, \`--candidate-percent 100 --policy ${alternativePolicies.join(' | ')}\`: no shared count and no Redis call per task (a Kubernetes Service or gRPC round_robin; HAProxy leastconn by each balancer's own in-flight count; Envoy LEAST_REQUEST, the less busy of two at random). All ${s.balancersPerPolicy * 4} balancers up the whole run; one load-generator process per policy spreads its calls evenly over that policy's balancers; one policy's load at a time. Everything shares the ${result.machine.nproc} cores.
- Tasks: \`bench/src/fleet/sleep-handlers.ts\` waits a log-normal time drawn in the worker: median ${s.sleep.medianMs} ms, sigma ${s.sleep.sigma} (p99 about 10x the median), at most ${s.sleep.maxMs} ms; ${factors || 'no integration slower'}; integrations in the cycle ${mix}; priorities in the cycle ${priorities} (one task in ${s.priorityMix.reduce((sum, p) => sum + p.weight, 0)} user-present). Mean task time ${result.meanTaskMs.toFixed(1)} ms.
- Capacity: measured first through Headroom's balancers, ${result.capacityTasksPerSecond.toFixed(0)} tasks/s: a closed loop keeping ${s.capacityProbe.slotsMultiple} times the cluster's slots in flight, ${s.capacityProbe.warmupMs} ms warm-up then ${s.capacityProbe.durationMs} ms measured (on paper, slots over the mean task time, ${result.nominalCapacityTasksPerSecond.toFixed(0)} tasks/s). The loads are shares of the measured figure, for every policy. ${probesLine(result)}
- Load: open loop, latency from when each task was due (no coordinated omission); ${s.leadInMs} ms lead-in, then a ${s.windowMs} ms window per policy and load.

${routingTables(result)}
`;
}

import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { markdownTable } from './report/table';
import { alternativesOf, type IncidentsResult } from './incidents';
import type { PartFigures } from './incidents-figures';

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(value < 10 ? 1 : 0) : '–');
const ratio = (value: number) => (Number.isFinite(value) ? `${value.toFixed(2)}x` : '–');
const codes = (part: PartFigures) =>
  Object.entries(part.byCode)
    .map(([code, n]) => `${code} ${n}`)
    .join(', ') || 'none';

export function incidentsTables(result: IncidentsResult): string {
  const slow = result.settings.slowIntegration;
  const others = markdownTable(
    [
      'alternative',
      'rep',
      'others: tasks before / during',
      'others: p99 ms before → during',
      'p99 during ÷ before',
      'others: queue wait p99 ms before → during',
      'queue wait during ÷ before',
      'others: run p99 ms during',
      'others: missed deadline or failed, during',
      'machine CPU %',
    ],
    result.summaries.map((s) => [
      s.alternative,
      String(s.repetition),
      `${s.othersBefore.tasks} / ${s.othersDuring.tasks}`,
      `${ms(s.othersBefore.p99Ms)} → ${ms(s.othersDuring.p99Ms)}`,
      ratio(s.othersP99Ratio),
      `${ms(s.othersBefore.queueWaitP99Ms)} → ${ms(s.othersDuring.queueWaitP99Ms)}`,
      ratio(s.othersQueueWaitP99Ratio),
      ms(s.othersDuring.runP99Ms),
      String(s.othersDuring.missed),
      String(s.machineCpuPercentOfCore ?? '?'),
    ]),
  );
  const slowTable = markdownTable(
    [
      'alternative',
      'rep',
      `${slow}: tasks during`,
      `${slow}: p50 / p99 ms during`,
      `${slow}: run p99 ms during`,
      `${slow}: answered with an error (by code), during`,
      'of them without an HR_ERR_* code',
      'lost (sent − answered, whole phase)',
      'dropped by the generator',
    ],
    result.summaries.map((s) => [
      s.alternative,
      String(s.repetition),
      String(s.slowDuring.tasks),
      `${ms(s.slowDuring.p50Ms)} / ${ms(s.slowDuring.p99Ms)}`,
      ms(s.slowDuring.runP99Ms),
      codes(s.slowDuring),
      String(s.slowDuring.uncoded),
      String(s.lostTasks),
      String(s.dropped),
    ]),
  );
  return `${others}\n\n${slowTable}\n\n${goalsTable(result.goals)}`;
}

export function incidentsMarkdown(result: IncidentsResult): string {
  const s = result.settings;
  const mix = s.integrationMix.map(({ name, weight }) => `${name}:${weight}`).join(', ');
  const priorities = s.priorityMix.map(({ priority, weight }) => `${priority}:${weight}`).join(', ');
  const alternatives = alternativesOf(s)
    .map(
      (a) =>
        `\`${a.name}\` (\`--policy ${a.policy}\`${a.defaultIntegrationLimit ? ` \`--default-integration-limit '${JSON.stringify(a.defaultIntegrationLimit)}'\`` : ''})`,
    )
    .join(', ');
  return `## incidents

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root; \`npm run bench -- incidents --smoke\` for the few-second version the tests run)
- Scenario built: **slow bank** only. One integration (${s.slowIntegration}) of ${s.integrationMix.length} turns ${s.slowdownFactor}x slower for ${s.incidentMs / 1000} s: the load generator marks its tasks due during the incident with \`{"sleepFactor": ${s.slowdownFactor}}\` in their payload, and \`bench/src/fleet/sleep-handlers.ts\` multiplies their wait (and its cap) by it. The background spike and high-load scenarios are not built.
- Setup: two clusters of ${s.workersPerCluster} workers at max parallelism ${s.maxParallelismPerWorker}, each worker its own process: \`baseline\` workers run \`--overflow refuse\` (Headroom's), \`candidate\` workers \`--overflow queue\` (up to ${s.maxLocalQueuedTasksPerWorker} waiting in a worker, as the routing benchmark's alternatives). Alternatives: ${alternatives}. Each has ${s.frontsPerAlternative} balancer processes of its own (fronts; no proxyless clients), started before its phase and stopped after it (idle balancers cost CPU), and one load-generator process spreading its calls over them; one alternative's load at a time, in an order rotated every repetition (${s.repetitions} repetition(s)). The capacity probe and each phase run with only that alternative's balancers up. Everything shares the ${result.machine.nproc} cores with other work.
- Limit chosen for \`headroom-limits\`: ${s.limitedShareOfCapacity} of a cluster's capacity per integration, not the default 0.5. The other three integrations carry three quarters of a ${Math.round(s.utilisation * 100)}% load, ${Math.round(0.75 * s.utilisation * 100)}% of capacity: with the slow bank holding half, they would run at ~${Math.round(((0.75 * s.utilisation) / 0.5) * 100)}% of what is left (long queues); at ${s.limitedShareOfCapacity} they run at ~${Math.round(((0.75 * s.utilisation) / (1 - s.limitedShareOfCapacity)) * 100)}%, about as busy as the whole fleet was before.
- Tasks: log-normal waits drawn in the worker from each task's sequence number (every alternative runs the same tasks): median ${s.sleep.medianMs} ms, sigma ${s.sleep.sigma}, at most ${s.sleep.maxMs} ms; integrations in the cycle ${mix}; priorities in the cycle ${priorities}; each task's deadline ${s.taskDeadlineMs} ms after it is sent.
- Load: capacity measured first through \`headroom-no-limits\` (closed loop, ${s.capacityProbe.slotsMultiple}x the cluster's slots in flight): ${result.capacityTasksPerSecond.toFixed(0)} tasks/s; offered ${result.offeredTasksPerSecond.toFixed(0)} tasks/s (${Math.round(s.utilisation * 100)}%), open loop, latency from when each task was due. Per alternative: ${s.leadInMs / 1000} s lead-in, ${s.beforeMs / 1000} s measured before the incident, ${s.incidentMs / 1000} s of incident; "before" and "during" are the tasks due in each part. The phase ends when every task sent has its answer.
- Figures: p99 over every answer (failed ones too); queue wait = latency − the handler's run time (Placement.run_ms), tasks that ran; "missed" = answered with an error, or later than the deadline.

${incidentsTables(result)}
`;
}

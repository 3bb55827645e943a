import type { PriorityPhase, PriorityResult, PriorityRun } from './priority';
import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { formatSpread } from './report/stats';
import { markdownTable } from './report/table';

const codes = (byCode: Record<string, number>) =>
  Object.entries(byCode)
    .map(([code, count]) => `${code} ${count}`)
    .join(', ') || '0';

/** "31 / 3+14 / 3+3+3 / 5": the balancer, the generators (user-present, background), the workers, Redis. */
function cpuBreakdown(r: PriorityRun): string {
  const c = r.cpuPercentOfCore;
  const workers = Object.entries(c)
    .filter(([name]) => name.startsWith('worker-'))
    .map(([, percent]) => percent);
  return `${c.balancer ?? '?'} / ${c['generator-user-present'] ?? '?'}+${c['generator-background'] ?? '?'} / ${workers.join('+') || '?'} / ${c.redis ?? '?'}`;
}

function phaseRow(repetition: number, phase: string, priority: string, p: PriorityPhase): string[] {
  return [
    String(repetition),
    phase,
    priority,
    String(p.sent),
    String(p.ran),
    codes(p.rejectedByCode),
    String(p.notSent),
    p.p50Ms.toFixed(1),
    p.p99Ms.toFixed(1),
    p.maxMs.toFixed(1),
  ];
}

export function priorityTables(result: PriorityResult): string {
  const summary = markdownTable(
    [
      'user-present tasks before / in the spike',
      'p50 ms before / in',
      'p99 ms before',
      'p99 ms in the spike',
      'spike ÷ before',
      'by run: p99 before / in, ratio',
      'user-present refused',
      'background refused (all runs)',
      'sent − answered by the balancer',
    ],
    [
      [
        `${result.userPresentSteady.count} / ${result.userPresentSpike.count}`,
        `${result.userPresentSteady.medianMs.toFixed(1)} / ${result.userPresentSpike.medianMs.toFixed(1)}`,
        result.userPresentSteady.p99Ms.toFixed(1),
        result.userPresentSpike.p99Ms.toFixed(1),
        `${result.userPresentP99PooledRatio.toFixed(2)}x`,
        `${formatSpread(result.userPresentP99SteadyMs, 1)} / ${formatSpread(result.userPresentP99SpikeMs, 1)}, ${formatSpread(result.userPresentP99Ratio)}x`,
        String(result.userPresentRejected),
        codes(result.backgroundRejectedByCode),
        String(result.sentMinusBalancerAnswers),
      ],
    ],
  );
  const perPhase = markdownTable(
    ['#', 'phase', 'priority', 'sent', 'ran', 'refused, by code', 'not sent', 'p50 ms', 'p99 ms', 'max ms'],
    result.runs.flatMap((r) => [
      phaseRow(r.repetition, 'before', 'user-present', r.steady.userPresent),
      phaseRow(r.repetition, 'before', 'background', r.steady.background),
      phaseRow(r.repetition, 'spike', 'user-present', r.spike.userPresent),
      phaseRow(r.repetition, 'spike', 'background', r.spike.background),
    ]),
  );
  const perRun = markdownTable(
    [
      '#',
      'sent (lead-in included)',
      "the balancer's final answers, by priority and outcome",
      'user-present mean wait for a slot ms: before / in the spike',
      'CPU % of core: balancer / generators / workers / redis',
    ],
    result.runs.map((r) => [
      String(r.repetition),
      String(r.sent),
      codes(r.balancerAnswersByPriorityAndOutcome),
      `${r.userPresentMeanSlotWaitMs.steady.toFixed(1)} / ${r.userPresentMeanSlotWaitMs.spike.toFixed(1)}`,
      cpuBreakdown(r),
    ]),
  );
  const repetitions = result.settings.repetitions;
  return [
    `${repetitions} run${repetitions === 1 ? '' : 's'}. User-present latency: every run's tasks pooled (one window holds few of them, so its p99 is about its slowest task); "by run": median (min..max) of each run's own, and of its spike over its own steady phase. Latency of the tasks that ran, from when each was due (open loop); refused = answered with an error instead (the code says why).`,
    '',
    summary,
    '',
    'Each run by phase (the phase a task was sent in):',
    '',
    perPhase,
    '',
    perRun,
    '',
    goalsTable(result.goals),
  ].join('\n');
}

export function priorityMarkdown(result: PriorityResult): string {
  const s = result.settings;
  const steadyRate = s.steadyUtilisation * result.capacityTasksPerSecond;
  return `## priority

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root)
- Setup: 1 balancer (\`--max-queued-tasks ${s.maxQueuedTasks} --kept-for-user-present-share ${s.keptForUserPresentShare} --metrics-port 0\`) and ${s.workerCount} workers at max parallelism ${s.maxParallelismPerWorker}, every task sleeping ${s.taskSleepMs} ms (demo handler). Capacity measured first, ${result.capacityTasksPerSecond.toFixed(0)} tasks/s: a closed loop keeping ${s.capacityProbe.slotsMultiple} times the slots in flight (${s.capacityProbe.warmupMs} ms warm-up, ${s.capacityProbe.durationMs} ms measured; on paper ${result.nominalCapacityTasksPerSecond.toFixed(0)} tasks/s, but a slot is also held while the task travels and its lease comes back). Two load-generator processes, one per priority. Everything shares the ${result.machine.nproc} cores.
- Load: open loop, ${steadyRate.toFixed(0)} tasks/s (${Math.round(s.steadyUtilisation * 100)}% of capacity), ${s.userPresentShare * 100}% user-present: ${s.leadInMs} ms lead-in, then a ${s.steadyMs} ms window; then background x${s.spikeFactor} (${(steadyRate * (s.userPresentShare + (1 - s.userPresentShare) * s.spikeFactor)).toFixed(0)} tasks/s in all) for ${s.spikeMs} ms, measured from its first task. Each task's deadline is ${s.taskTimeoutMs} ms; a phase ends only when every task it sent was answered. Runs: ${s.repetitions}, on the same fleet, ${s.pauseMs} ms apart.
- Answers: the generators count each task of a window by how it was answered; the balancer's \`headroom_balancer_tasks_total\` counts each final answer it gave, by priority and outcome, lead-ins included.

${priorityTables(result)}
`;
}

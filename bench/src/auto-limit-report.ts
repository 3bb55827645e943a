import { goals, type AutoLimitResult } from './auto-limit';
import type { LimitPoint } from './auto-limit-figures';
import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { markdownTable } from './report/table';

const seconds = (ms: number | null) => (ms === null ? 'never' : (ms / 1000).toFixed(1));
const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(0) : '–');
const codes = (byCode: Record<string, number>) =>
  Object.entries(byCode)
    .map(([code, n]) => `${code} ${n}`)
    .join(', ') || 'none';

/** "20 (+0) 10 (+35) 20 (+95)": each value the limit took from the incident's start, and when (s from the start). */
function limitSteps(history: readonly LimitPoint[], incidentStartUnixMs: number): string {
  const steps: string[] = [];
  let previous: number | undefined;
  for (const point of history) {
    if (point.limitInFlight === previous) continue;
    previous = point.limitInFlight;
    if (point.atUnixMs < incidentStartUnixMs) steps.splice(0, steps.length, `${point.limitInFlight} (before)`);
    else steps.push(`${point.limitInFlight} (+${((point.atUnixMs - incidentStartUnixMs) / 1000).toFixed(0)})`);
  }
  return steps.join(' → ');
}

export function autoLimitTables(result: AutoLimitResult): string {
  const s = result.settings;
  const limits = markdownTable(
    [
      'rep',
      'limit at start → end (lowest)',
      'settled, s after the start',
      'back to stay, s after the end (first back)',
      'changes (lead-in)',
      'decisions',
      'the limit, s from the incident start',
    ],
    result.repetitions.map((r) => [
      String(r.repetition),
      `${r.limit.atStartInFlight ?? '–'} → ${r.limit.atEndInFlight ?? '–'} (${r.limit.lowestInFlight ?? '–'})`,
      seconds(r.limit.settledAfterMs),
      `${seconds(r.limit.backAfterMs)} (${seconds(r.limit.firstBackAfterMs)})`,
      `${r.limit.changes} (${r.limit.leadInChanges})`,
      String(r.limit.decisions),
      limitSteps(r.history, r.incidentStartUnixMs),
    ]),
  );
  const context = markdownTable(
    [
      'rep',
      'others: tasks before / during',
      'others: p99 ms before → during',
      'others: p99 ms once settled',
      'others: missed, during',
      `${s.autoIntegration}: tasks during`,
      `${s.autoIntegration}: answered with an error, during`,
      'lost',
      'machine CPU %',
    ],
    result.repetitions.map(({ repetition, tasks: t, othersSettled }) => [
      String(repetition),
      `${t.othersBefore.tasks} / ${t.othersDuring.tasks}`,
      `${ms(t.othersBefore.p99Ms)} → ${ms(t.othersDuring.p99Ms)}`,
      othersSettled ? `${ms(othersSettled.p99Ms)} (${othersSettled.tasks} tasks)` : '–',
      String(t.othersDuring.missed),
      String(t.slowDuring.tasks),
      codes(t.slowDuring.byCode),
      String(t.lostTasks),
      String(t.machineCpuPercentOfCore ?? '?'),
    ]),
  );
  return `${limits}\n\n${context}\n\n${goalsTable(result.goals)}`;
}

export function autoLimitMarkdown(result: AutoLimitResult): string {
  const s = result.settings;
  const mix = s.integrationMix.map(({ name, weight }) => `${name}:${weight}`).join(', ');
  const tick = s.autoLimitTickMs === undefined ? 'its default tick' : `\`--auto-limit-tick-ms ${s.autoLimitTickMs}\``;
  return `## auto-limit

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Command: \`${result.command}\` (from the repository root; \`npm run bench -- auto-limit --smoke\` for the few-second version the tests run)
- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Goal: a limit in auto mode settles within ${goals.settledWithinMs / 1000} s of an incident's start and is back at its normal value within ${goals.backWithinMs / 1000} s of its end.
- Setup: one cluster (\`${s.cluster}\`) of ${s.workersPerCluster} sleep-handler workers at max parallelism ${s.maxParallelismPerWorker} (\`--overflow refuse\`), ${s.balancerCount} balancers (least-loaded, the default per-integration limit: half the cluster), a real Unleash and the control plane with its auto limiter at ${tick} (decisions ${(result.measuredTickMs / 1000).toFixed(1)} s apart as measured), each its own process, sharing the ${result.machine.nproc} cores.
- ${s.autoIntegration} in auto mode: \`PUT /api/v1/limits/${s.cluster}/${s.autoIntegration} {"limit": {"auto": ${JSON.stringify(s.auto)}}}\`; its normal value is the maximum, ${s.auto.maxInFlight}.
- Load: ${mix}, log-normal tasks (median ${s.sleep.medianMs} ms, sigma ${s.sleep.sigma}, at most ${s.sleep.maxMs} ms), each task's deadline ${s.taskDeadlineMs / 1000} s; capacity measured first (the better of two closed-loop probes, ${s.capacityProbe.slotsMultiple}x the slots in flight): ${result.capacityTasksPerSecond.toFixed(0)} tasks/s; offered ${result.offeredTasksPerSecond.toFixed(0)} tasks/s (${Math.round(s.utilisation * 100)}%), open loop.
- Each of ${s.repetitions} repetitions, one phase: a lead-in (${s.firstLeadInMs / 1000} s the first time, then ${s.leadInMs / 1000} s), ${s.autoIntegration}'s tasks ${s.slowdownFactor}x slower for ${s.incidentMs / 1000} s (\`{"sleepFactor": ${s.slowdownFactor}}\` in the payload of those due then), then ${s.afterMs / 1000} s as usual. The limit's decisions from \`GET /api/v1/limits/${s.cluster}/${s.autoIntegration}/history\`.
- Settled: the first decision after the start from which the limit stays within ±${s.settleBand * 100}% of its value at the incident's end (below its normal value) until the end; the rule steps by halves and doubles, so the band forgives rounding only, and a fall, a bounce and a fall settle at the last fall. Back: the first decision after the end from which the limit stays at its maximum to the end of the observation (first back: the first at its maximum). A repetition that never settles or comes back counts as infinite.
- Context: the other integrations' p99 over the lead-in's last ${s.beforeMs / 1000} s, during the incident, and from the limit's settling to the incident's end (tasks by when they were due; failed ones included).

${autoLimitTables(result)}
`;
}

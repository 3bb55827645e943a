import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { markdownTable } from './report/table';
import { alternativesOf, type IncidentsResult, type ScenarioName } from './incidents';
import { failedCount, type PartFigures } from './incidents-figures';

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(value < 10 ? 1 : 0) : '–');
const ratio = (value: number) => (Number.isFinite(value) ? `${value.toFixed(2)}x` : '–');
const codes = (part: PartFigures) =>
  Object.entries(part.byCode)
    .map(([code, n]) => `${code} ${n}`)
    .join(', ') || 'none';

/** The slow bank's two tables: the other integrations before and during, and the slow one during. */
function slowBankTables(result: IncidentsResult): string {
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
    result.slowBank.map((s) => [
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
    result.slowBank.map((s) => [
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
  return `${others}\n\n${slowTable}`;
}

const cpu = (s: { machineCpuPercentOfCore: number | undefined }) => String(s.machineCpuPercentOfCore ?? '?');
const sendLag = (s: { sendLagP99Ms?: number }) => (s.sendLagP99Ms === undefined ? '–' : ms(s.sendLagP99Ms));
const waits = (part: PartFigures) => `${ms(part.queueWaitP50Ms)} / ${ms(part.queueWaitP99Ms)}`;
/** Runs carried over from before the slot wait was recorded have none: '–'. */
const slotWaits = (part: PartFigures) => (Number.isFinite(part.slotWaitP99Ms) ? `${ms(part.slotWaitP50Ms)} / ${ms(part.slotWaitP99Ms)}` : '–');

function spikeTable(result: IncidentsResult): string {
  return markdownTable(
    [
      'alternative',
      'rep',
      'user-present: tasks before / during',
      'user-present: queue wait p50 / p99 ms, before',
      'user-present: queue wait p50 / p99 ms, during',
      'user-present: slot wait p50 / p99 ms, during',
      'user-present: p99 ms during',
      'user-present: refused or failed during (by code)',
      'background: tasks during',
      'background: refused or failed during (by code)',
      'background: queue wait p99 ms during',
      'lost',
      'dropped',
      'generator send lag p99 ms',
      'machine CPU %',
    ],
    result.backgroundSpike.map((s) => [
      s.alternative,
      String(s.repetition),
      `${s.userBefore.tasks} / ${s.userDuring.tasks}`,
      waits(s.userBefore),
      waits(s.userDuring),
      slotWaits(s.userDuring),
      ms(s.userDuring.p99Ms),
      codes(s.userDuring),
      String(s.backgroundDuring.tasks),
      `${failedCount(s.backgroundDuring)}: ${codes(s.backgroundDuring)}`,
      ms(s.backgroundDuring.queueWaitP99Ms),
      String(s.lostTasks),
      String(s.dropped),
      sendLag(s),
      cpu(s),
    ]),
  );
}

function highLoadTable(result: IncidentsResult): string {
  return markdownTable(
    [
      'alternative',
      'rep',
      'tasks',
      'queueing p50 / p99 ms (all tasks that ran)',
      'queueing p99 ÷ best non-Headroom',
      'p99 ms (every answer)',
      'run p99 ms',
      'user-present: queue wait p50 / p99 ms',
      'refused or failed (by code)',
      'lost',
      'dropped',
      'generator send lag p99 ms',
      'machine CPU %',
    ],
    result.highLoad.map((s) => [
      s.alternative,
      String(s.repetition),
      String(s.all.tasks),
      waits(s.all),
      s.queueWaitP99OverBest === undefined ? '–' : ratio(s.queueWaitP99OverBest),
      ms(s.all.p99Ms),
      ms(s.all.runP99Ms),
      waits(s.user),
      codes(s.all),
      String(s.lostTasks),
      String(s.dropped),
      sendLag(s),
      cpu(s),
    ]),
  );
}

/** Run this time, or carried over from the recorded run (with its date). */
function shown(result: IncidentsResult, scenario: ScenarioName): string | undefined {
  if (result.scenarios.includes(scenario)) return '';
  const carried = result.carriedOver?.find((c) => c.scenario === scenario);
  return carried ? ` (carried over from the run of ${carried.startedAt})` : undefined;
}

export function incidentsTables(result: IncidentsResult): string {
  const section = (scenario: ScenarioName, title: string, tables: (r: IncidentsResult) => string) => {
    const note = shown(result, scenario);
    return note === undefined ? [] : [`### ${title}${note}\n\n${tables(result)}`];
  };
  const parts = [
    ...section('slow-bank', 'Slow bank', slowBankTables),
    ...section('background-spike', 'Background spike', spikeTable),
    ...section('high-load', 'High load', highLoadTable),
    `### Goals\n\n${goalsTable(result.goals)}`,
  ];
  return parts.join('\n\n');
}

const percent = (share: number) => `${Math.round(share * 100)}%`;

/** The setup line: how many fronts of each kind every alternative has. */
function setupLine(result: IncidentsResult): string {
  const s = result.settings;
  const alternatives = alternativesOf(s)
    .map((a) => {
      const limit = a.defaultIntegrationLimit ? ` \`--default-integration-limit '${JSON.stringify(a.defaultIntegrationLimit)}'\`` : '';
      const fronts = `${s.frontsPerAlternative - a.proxylessFronts} balancers${a.proxylessFronts > 0 ? ` + ${a.proxylessFronts} proxyless clients` : ''}`;
      return `\`${a.name}\` (\`--policy ${a.policy}\`${limit}; ${fronts})`;
    })
    .join(', ');
  return `- Setup: two clusters of ${s.workersPerCluster} workers at max parallelism ${s.maxParallelismPerWorker}, each worker its own process: \`baseline\` workers run \`--overflow refuse\` (Headroom's), \`candidate\` workers \`--overflow queue\` (up to ${s.maxLocalQueuedTasksPerWorker} waiting in a worker, as the routing benchmark's alternatives). ${s.integrationMix.length} integrations. Alternatives, each with ${s.frontsPerAlternative} fronts of its own: ${alternatives}. A proxyless client front is a process of its own (\`bench/src/fleet/proxyless-front.ts\`) running \`@headroom/client/proxyless\` with the same policy and limit: it settles the slot in Redis itself and calls the worker directly; the load generator hands it each task over gRPC, as it hands one to a balancer. An alternative's fronts are started before its phases and stopped after them (idle processes cost CPU); one load-generator process spreads its calls over them. One alternative's load at a time, in an order rotated every repetition (${s.repetitions} repetition(s)). Everything shares the ${result.machine.nproc} cores with other work.`;
}

function scenarioLines(result: IncidentsResult): string {
  const s = result.settings;
  const offered = result.offeredTasksPerSecond;
  const lines: string[] = [];
  const carried = (scenario: ScenarioName) => {
    const c = result.carriedOver?.find((entry) => entry.scenario === scenario);
    return c
      ? ` **Not run this time: its figures are those of the run of ${c.startedAt} (\`${c.command}\`), capacity ${c.capacityTasksPerSecond.toFixed(0)} tasks/s, ${c.frontsPerAlternative} fronts per alternative of which ${c.proxylessFrontsPerHeadroomAlternative} proxyless clients for Headroom's.**`
      : '';
  };
  if (shown(result, 'slow-bank') !== undefined)
    lines.push(
      `- Slow bank: one integration (${s.slowIntegration}) of ${s.integrationMix.length} turns ${s.slowdownFactor}x slower for ${s.incidentMs / 1000} s at ${percent(s.utilisation)} load (${offered['slow-bank'].toFixed(0)} tasks/s): the load generator marks its tasks due during the incident with \`{"sleepFactor": ${s.slowdownFactor}}\` in their payload, and \`bench/src/fleet/sleep-handlers.ts\` multiplies their wait (and its cap) by it. ${s.leadInMs / 1000} s lead-in, ${s.beforeMs / 1000} s measured before the incident, ${s.incidentMs / 1000} s of incident. Limit chosen for \`headroom-limits\`: ${s.limitedShareOfCapacity} of a cluster's capacity per integration, not the default 0.5. The other three integrations carry three quarters of the load, ${percent(0.75 * s.utilisation)} of capacity: with the slow bank holding half, they would run at ~${percent((0.75 * s.utilisation) / 0.5)} of what is left (long queues); at ${s.limitedShareOfCapacity} they run at ~${percent((0.75 * s.utilisation) / (1 - s.limitedShareOfCapacity))}, about as busy as the whole fleet was before.${carried('slow-bank')}`,
    );
  if (shown(result, 'background-spike') !== undefined) {
    const b = s.backgroundSpike;
    lines.push(
      `- Background spike: ${percent(b.utilisation)} load (${offered['background-spike'].toFixed(0)} tasks/s), then for ${b.spikeMs / 1000} s the background tasks come ${b.factor}x as fast (a second schedule of background tasks, ${b.factor - 1}x the background rate, over the same integrations) while the user-present ones keep their rate. ${s.leadInMs / 1000} s lead-in, ${b.beforeMs / 1000} s measured before the spike, ${b.spikeMs / 1000} s of spike. Balancers and proxyless clients run with their defaults: 10,000 queued tasks at most per front, 10% of capacity, and of each integration's limit, kept for user-present tasks.${carried('background-spike')}`,
    );
  }
  if (shown(result, 'high-load') !== undefined)
    lines.push(
      `- High load: ${percent(s.highLoad.utilisation)} load (${offered['high-load'].toFixed(0)} tasks/s) for ${s.highLoad.measuredMs / 1000} s after a ${s.leadInMs / 1000} s lead-in. Queueing time = latency − run time, of every task that ran; its p99 over the lowest of least-request, least-request-p2c and round-robin in the same repetition.${carried('high-load')}`,
    );
  const skipped = (['slow-bank', 'background-spike', 'high-load'] as const).filter((name) => shown(result, name) === undefined);
  if (skipped.length > 0) lines.push(`- Not run (\`--scenario\`), and no earlier figures: ${skipped.join(', ')}.`);
  return lines.join('\n');
}

export function incidentsMarkdown(result: IncidentsResult): string {
  const s = result.settings;
  const mix = s.integrationMix.map(({ name, weight }) => `${name}:${weight}`).join(', ');
  const priorities = s.priorityMix.map(({ priority, weight }) => `${priority}:${weight}`).join(', ');
  return `## incidents

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root; \`--scenario slow-bank,background-spike,high-load\` picks scenarios, all by default; \`npm run bench -- incidents --smoke\` for the few-second version the tests run)
- Scenarios run: ${result.scenarios.map((name) => `**${name}**`).join(', ')}.
${setupLine(result)}
- Tasks: log-normal waits drawn in the worker from each task's sequence number (every alternative runs the same tasks): median ${s.sleep.medianMs} ms, sigma ${s.sleep.sigma}, at most ${s.sleep.maxMs} ms; integrations in the cycle ${mix}; priorities in the cycle ${priorities}; each task's deadline ${s.taskDeadlineMs} ms after it is sent.
- Load: capacity measured first through \`headroom-no-limits\` (closed loop, ${s.capacityProbe.slotsMultiple}x the cluster's slots in flight): ${result.capacityTasksPerSecond.toFixed(0)} tasks/s. Every scenario is one open-loop phase per alternative, latency from when each task was due; its parts are the tasks due in each. A phase ends when every task sent has its answer; the next scenario then starts on the same fronts.
${scenarioLines(result)}
- Figures: p99 over every answer (failed ones too); queue wait (queueing time) = latency − the handler's run time (Placement.run_ms), tasks that ran; slot wait = the time a task waited for a slot, at its front or in a worker's own queue (Placement.queue_wait_ms + worker_queue_wait_ms): what admission decides, without the travel and CPU queueing in the queue wait; "missed" = answered with an error, or later than the deadline; "refused or failed" = answered with an error code (HR_ERR_* from Headroom, GRPC_* a bare gRPC status); "generator send lag" = how late the load generator sent the measured tasks (p99; it counts in every latency and queue wait, '–' where not recorded).

${incidentsTables(result)}
`;
}

import type { AutopilotResult } from './autopilot';
import { describeLoad, describeWorkerGroups } from './report/fleet-load';
import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import type { Figures } from './report/stats';
import { markdownTable } from './report/table';

const seconds = (ms: number) => (ms / 1000).toFixed(2);
const row = (f: Figures) => [seconds(f.medianMs), seconds(f.maxMs), String(f.count)];

export function autopilotTables(result: AutopilotResult): string {
  const s = result.settings;
  const summary = markdownTable(
    [`from the incident's start (gate window ${s.plan.windowSeconds} s)`, 'median s', 'max s', 'n'],
    [
      ["to the autopilot's rollback decision", ...row(result.toDecision)],
      [`to the last of ${s.balancerCount} balancers' acknowledgements of the rollback`, ...row(result.toLastAck)],
    ],
  );
  const perRepetition = markdownTable(
    ['#', 'to decision s', 'to last ack s', 'propagationMs', 'acks', 'rolled back', 'the decision'],
    result.samples.map((sample, index) => [
      String(index + 1),
      seconds(sample.toDecisionMs),
      seconds(sample.toLastAckMs),
      sample.propagationMs.toFixed(1),
      `${sample.acknowledgedBy.length}/${s.balancerCount}`,
      sample.rolledBack.join(', '),
      sample.decision,
    ]),
  );
  return [
    summary,
    '',
    `Rollouts rolled back before their incident (not measured, tried again): ${result.rollbacksBeforeIncident.length}${result.rollbacksBeforeIncident.length > 0 ? ` (${result.rollbacksBeforeIncident.join('; ')})` : ''}.`,
    describeLoad(result.load),
    '',
    perRepetition,
    '',
    goalsTable(result.goals),
  ].join('\n');
}

export function autopilotMarkdown(result: AutopilotResult): string {
  const s = result.settings;
  const workers = describeWorkerGroups(s.workers);
  return `## autopilot

${result.mode === 'smoke' ? '**Smoke run: one repetition, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root)
- Setup: ${s.balancerCount} balancers and ${workers} workers running the bank handlers against the bank simulator (latencies x${s.bankTimeScale}), each its own process; a real Unleash server and the control plane (autopilot tick ${s.controlPlane.autopilotTickMs} ms, latency settle ${s.controlPlane.latencySettleMs} ms; workers add their latencies every ${s.latencyReportIntervalMs} ms) processes of their own. Everything shares the ${result.machine.nproc} cores.
- Load: open loop, ${s.load.tasksPerSecond} tasks/s over the balancers, ${s.integrations.join(' and ')} in turn, the handlers' default payload (the account and up to 4 pages of transactions).
- Before the first: ${s.warmupPercent}% of the traffic on the candidate for ${s.warmupMs} ms (its workers are new processes: a rollout judged on their first, cold tasks is rolled back for them), then a window on the baseline alone.
- Each of ${s.repetitions} repetitions: a rollout of ${s.integrations.join(' and ')} starts at ${s.plan.candidatePercent}% on the candidate (gate window ${s.plan.windowSeconds} s, p50 ratio line ${s.plan.p50Ratio}, at least ${s.plan.minSamples} tasks per cluster in a window); once its first whole window has passed, healthy, the simulator makes ${s.slowIntegration} ${s.incidentFactor}x slower for the candidate's calls alone (\`POST /incidents {"kind": "slow", "cluster": "candidate"}\`). Timed from the incident's start (the simulator's clock) to the autopilot's rollback decision, and to the last balancer's acknowledgement of that rollback (the acknowledgements in Redis, Redis's clock; one machine). Then the rollout is aborted, the incident cleared, ${s.slowIntegration} resumed, both integrations set to 0%, and the next waits a window, a latency slot (10 s: a window reads the slots it overlaps) and the settle time, so that no slow task is left in a window.
- What bounds it: the p50 over a window crosses the line only once enough of the window's candidate tasks are slow (for a ${s.incidentFactor}x slowdown against a line of ${s.plan.p50Ratio}, about half of them), plus the settle time the gates read behind, plus a tick; the rollback itself is milliseconds (propagationMs).

${autopilotTables(result)}
`;
}

import { describeLoad, describeWorkerGroups } from './report/fleet-load';
import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import type { Figures } from './report/stats';
import { markdownTable } from './report/table';
import { formatLateStart, type RollbackResult } from './rollback';

const ms = (value: number) => value.toFixed(1);
const row = (f: Figures) => [ms(f.medianMs), ms(f.p99Ms), ms(f.maxMs), String(f.count)];

export function rollbackTables(result: RollbackResult): string {
  const balancers = result.settings.balancerCount;
  const summary = markdownTable(
    ['change reaches every balancer', 'median ms', 'p99 ms', 'max ms', 'n'],
    [
      [`POST /rollback sent → last of ${balancers} acknowledgements (Redis clock)`, ...row(result.toLastAck)],
      ["the control plane's propagationMs (from its override change)", ...row(result.propagation)],
      ['POST /rollback sent → answer (every balancer acknowledged)', ...row(result.roundTrip)],
      ['POST /rollback sent → durable in Unleash (GET /traffic polled)', ...row(result.durable)],
      ['POST /resume sent → answer (every balancer lifted the override)', ...row(result.resumeRoundTrip)],
      [`flag polling alone: PUT /traffic → all ${balancers} route to baseline`, ...row(result.polling.allBalancers)],
      [`POST /resume → all ${balancers} route to candidate (flag polling)`, ...row(result.backOnCandidate)],
    ],
  );
  const perRollback = markdownTable(
    [
      '#',
      'last ack ms',
      'propagationMs',
      'answer ms',
      'durable ms',
      'resume answer ms',
      'acks',
      'candidate starts in lead-in',
      'candidate starts after ack',
      'baseline starts after ack',
      'last candidate start, ms before ack',
    ],
    result.rollbacks.map((r, index) => [
      String(index + 1),
      String(r.toLastAckMs),
      ms(r.propagationMs),
      ms(r.roundTripMs),
      `${ms(r.durableMs)}${r.durable === 'done' ? '' : ` (${r.durable})`}`,
      ms(r.resumeRoundTripMs),
      `${r.acknowledgedBy.length}/${balancers}`,
      String(r.candidateStartsInLeadIn),
      `${r.candidateStartsAfterAck}${r.lateCandidateStarts.map(formatLateStart).join('')}`,
      String(r.baselineStartsAfterAck),
      r.lastCandidateStartBeforeAckMs === null ? '-' : ms(r.lastCandidateStartBeforeAckMs),
    ]),
  );
  return [
    summary,
    '',
    `Flag polling alone is ${result.pollingToRollbackRatio.toFixed(0)}x the rollback (median over median).`,
    `Candidate tasks started after the last acknowledgement (workers' records): ${result.candidateStartsAfterAck}, of which sent by the client after it: ${result.candidateStartsSentAfterAck}; every rollback acknowledged by all ${balancers} balancers: ${result.acknowledgedByAllEveryTime ? 'yes' : 'NO'}.`,
    describeLoad(result.load),
    '',
    perRollback,
    '',
    goalsTable(result.goals),
  ].join('\n');
}

export function rollbackMarkdown(result: RollbackResult): string {
  const s = result.settings;
  const workers = describeWorkerGroups(s.workers);
  return `## rollback

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root)
- Setup: ${s.balancerCount} balancers and ${workers} workers, each its own process, reading flags from a real Unleash server every ${s.flagsRefreshIntervalMs} ms; Unleash, the control plane and the load generator run in processes of their own. Everything shares the ${result.machine.nproc} cores.
- Load: open loop, ${s.load.tasksPerSecond} tasks/s spread over the balancers, integration ${s.integration}, each task sleeping ${s.load.taskSleepMs} ms in the worker; ${s.load.warmupMs} ms before the first measurement, then until the last.
- Comparison: ${s.pollingRepetitions} times, \`PUT /api/v1/traffic\` takes ${s.integration} from 100% to 0% candidate, timed from the request until every balancer has sent a probe task (fixed key, sent every ${s.probe.intervalMs} ms to each) to the baseline; then back to 100%.
- Rollbacks: ${s.rollbacks} times, after ${s.leadInMs} ms of load with every balancer on the candidate, \`POST /api/v1/rollback\` with \`{}\`, timed from sending it (Date.now()) to the last of the acknowledgements the balancers wrote to Redis (Redis's clock, same machine; both in whole ms), and to its answer (the control plane answers once every balancer acknowledged, and writes Unleash after it; GET /traffic is polled until that write is done). The control plane's own \`propagationMs\` starts later, at its override change. The workers record each task's start (Date.now()); a candidate start after the last acknowledgement, up to ${s.holdMs} ms after the answer, counts against the goal. Then \`POST /api/v1/resume\` and a wait until every balancer routes to the candidate again.

${rollbackTables(result)}
`;
}

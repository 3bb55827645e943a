/**
 * An incident, then recovery: an open-loop load over four integrations, one of which turns 10x
 * slower for a while. Deadlines are short, so during the incident tasks pass them both while they
 * wait for a slot and while they run; many end as the balancer's deadline fires while the worker
 * answers, so the balancer never gets the answer: the worker then releases the lease itself, and
 * the heartbeats give back what no release reached (docs/ledger.md: within 3 heartbeat periods of the
 * task's end). So:
 *  - once the incident is over, throughput and p99 latency are back to what they were before it
 *    within 3 heartbeat periods, and stay there;
 *  - throughout, every slot the ledger counts is a lease reserved within the task's deadline + 3
 *    heartbeat periods: no slot is kept past that bound, neither as a lease nobody drops nor as a
 *    count with no lease behind it (ledger-watch.ts). Next to it, what the ledger counts beyond
 *    what each worker runs is recorded.
 * When the ledger repaired counts from answer counts, it kept counting answered tasks as in
 * flight, and 85-97% of the tasks after such an incident failed with DEADLINE_EXCEEDED; with
 * lease ids but no release by the worker of an answer past its deadline, the lost slots kept the
 * queue's head expiring and service did not come back in 2 runs of 3.
 *
 * The slow upstream is the demo handlers' sleep, chosen per task by the load: a task of the slow
 * integration submitted during the incident sleeps 10x as long, the others as usual. (The bank
 * simulator's latencies have tails of seconds and error rates, which would blur "as before".)
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { json, task } from '@headroom/testkit';
import { workerErrorCodes } from '@headroom/worker';
import {
  FleetWatch,
  TaskLog,
  countedPastBound,
  finishCase,
  healthyFromMs,
  ledgerExcess,
  longestSampleGapMs,
  scrapeMetrics,
  serviceBetween,
  serviceWindows,
  sleep,
  startOpenLoad,
  startStack,
  type FaultStack,
  type LedgerSample,
  type ServiceFigures,
  type ServiceWindow,
} from '../src/index';

/** The workers' default; the bound under test is counted in periods. */
const heartbeatPeriodMs = 1000;
const recoveryBoundMs = 3 * heartbeatPeriodMs;
const workerCount = 4;
const maxParallelism = 4;
const integrations = ['bank-a', 'bank-b', 'bank-c', 'bank-d'];
const slowIntegration = 'bank-a';
/** 60% of the fleet's 16 slots before the incident; during it, the slow integration's tasks alone would take all 16 (each holds its slot until its deadline). */
const arrivalsPerSecond = 64;
/** 100-200 ms: a healthy upstream's answer (deterministic, so every run sees the same load). */
const healthyTaskMs = (seq: number) => 100 + ((seq * 37) % 101);
const slowFactor = 10;
/**
 * A slow task (1-2 s) passes it mid-run, and so does a task that waited long for a slot. One
 * period: once the incident is over, its last slow tasks end within one period.
 */
const taskDeadlineMs = heartbeatPeriodMs;
/** One task in five has a tighter deadline: while the fleet is full, it passes before the task starts. */
const tightDeadlineMs = 600;
const deadlineMsOf = (seq: number) => (seq % 5 === 0 ? tightDeadlineMs : taskDeadlineMs);
/** The open load's phases; `settle`: the open load's first seconds, not measured. */
const phasesMs = { settle: 2000, before: 10_000, incident: 15_000, after: 12_000 };
/**
 * Before the open load, rounds in which each balancer in turn sends one task per worker at once,
 * until every balancer has placed a task on every worker: connections are open and code is
 * compiled before a deadline can be missed for it. (A closed load waiting for that by chance
 * timed out once on a loaded machine.)
 */
const warmUpRounds = { least: 5, most: 20 };
/** 128 tasks a window: its p99 is its second slowest task, not its slowest (a busy machine delays one now and then). */
const windowMs = 2000;
const windowStepMs = 250;
/** A window is healthy when this share of its tasks got a result ... */
const healthyOkShare = 0.9;
/** ... and its p99 latency is at most this times the p99 before the incident, plus `p99MarginMs`. */
const p99Factor = 1.5;
const p99MarginMs = 100;
/**
 * Every task ends by its deadline, and its slot must be back within 3 periods of that: a lease
 * counted longer after its reservation is a slot kept too long (ledger-watch.ts).
 */
const leaseBoundMs = taskDeadlineMs + recoveryBoundMs;
/** A lease reserved less than this long ago may still be on its way to its worker (for the excess figure). */
const inTransitMs = 100;
const ledgerSampleIntervalMs = 100;
/** The excess figure leaves out samples whose worker took longer to answer: its two reads are too far apart to compare. */
const maxScrapeMs = 100;

interface IncidentTimes {
  /** When the open load began (the warm-up is over). */
  loadStartMs: number;
  incidentFromMs: number;
  incidentToMs: number;
  loadEndMs: number;
}

function incidentTimes(loadStartMs: number): IncidentTimes {
  const incidentFromMs = loadStartMs + phasesMs.settle + phasesMs.before;
  const incidentToMs = incidentFromMs + phasesMs.incident;
  return { loadStartMs, incidentFromMs, incidentToMs, loadEndMs: incidentToMs + phasesMs.after };
}

async function startFleet(t: TestContext): Promise<FaultStack> {
  return startStack(t, {
    workers: Array.from({ length: workerCount }, (_, i) => ({
      workerId: `w${i}`,
      cluster: 'baseline',
      maxParallelism,
      heartbeatIntervalMs: heartbeatPeriodMs,
    })),
    balancerCount: 2,
    // Three periods, as by default: a worker late by a period on a busy machine is not swept.
    heartbeatTimeoutMs: 3 * heartbeatPeriodMs,
  });
}

const loadTask = (seq: number, integration: string, slow = false) =>
  task({
    integration,
    priority: 'USER_PRESENT',
    payload: json({ sleepMs: healthyTaskMs(seq) * (slow ? slowFactor : 1) }),
    deadlineUnixMs: Date.now() + deadlineMsOf(seq),
  });

/**
 * The warm-up (see warmUpRounds). A balancer's burst of one task per worker lands one on each: the
 * fleet is idle, and the least-loaded pick takes a worker that has all its slots free while one does.
 */
async function warmUp(stack: FaultStack, log: TaskLog): Promise<void> {
  const pairsPlaced = () =>
    new Set(log.submissions.flatMap((s) => (s.answer?.ok && s.answer.response.placement ? [`${s.balancerId}>${s.answer.response.placement.workerId}`] : [])))
      .size;
  const allPairs = stack.balancers.length * stack.workers.length;
  let seq = 0;
  for (let round = 0; round < warmUpRounds.most && (round < warmUpRounds.least || pairsPlaced() < allPairs); round++) {
    for (const balancer of stack.balancers) {
      await Promise.all(stack.workers.map((_, i) => log.submit(balancer, loadTask(seq++, integrations[i % integrations.length]!))));
    }
  }
  assert.equal(pairsPlaced(), allPairs, `every balancer placed a task on every worker within ${warmUpRounds.most} warm-up rounds`);
}

/** The warm-up, then the open load through its phases (timed by design: an incident lasts as long as it lasts); waits for every answer. */
async function runLoad(t: TestContext, stack: FaultStack, log: TaskLog): Promise<IncidentTimes & { skippedTicks: number }> {
  await warmUp(stack, log);
  const times = incidentTimes(performance.now());
  const totalMs = times.loadEndMs - times.loadStartMs;
  const load = startOpenLoad(t, log, {
    ratePerSecond: arrivalsPerSecond,
    // Each task is answered within its deadline plus the client's grace: reached only if answers hang.
    maxOutstanding: 500,
    // Every integration's tasks through every balancer, as behind a load balancer.
    balancerFor: (seq) => stack.balancers[Math.floor(seq / integrations.length) % stack.balancers.length]!,
    taskFor: (seq) => {
      const integration = integrations[seq % integrations.length]!;
      const nowMs = performance.now();
      const slow = integration === slowIntegration && nowMs >= times.incidentFromMs && nowMs < times.incidentToMs;
      return loadTask(seq, integration, slow);
    },
    maxTasks: Math.ceil((arrivalsPerSecond * totalMs) / 1000) + 200,
    maxDurationMs: totalMs + 10_000,
  });
  await sleep(totalMs);
  await load.stop();
  return { ...times, skippedTicks: load.skippedTicks() };
}

interface DeadlineCounts {
  /** Tasks whose deadline passed while they ran (the workers' count). */
  expiredRunning: number;
  /** The other answers saying the deadline passed: it did before the task started. */
  expiredBeforeStart: number;
  /** Leases the heartbeats dropped (counted since the fix only). */
  leasesDropped: number;
}

async function deadlineCounts(stack: FaultStack, log: TaskLog): Promise<DeadlineCounts> {
  let expiredRunning = 0;
  let leasesDropped = 0;
  for (const worker of stack.liveWorkers()) {
    const metrics = await scrapeMetrics(worker.metricsPort);
    expiredRunning += metrics.sum('headroom_worker_handler_errors_total', { code: workerErrorCodes.deadlineExceeded });
    leasesDropped += metrics.sum('headroom_worker_ledger_lease_repairs_total', { repair: 'dropped' });
  }
  const answeredDeadline = log.submissions.filter((s) => {
    const code = s.answer?.ok ? s.answer.response.error?.code : s.answer?.code;
    return code === workerErrorCodes.deadlineExceeded;
  }).length;
  return { expiredRunning, expiredBeforeStart: answeredDeadline - expiredRunning, leasesDropped };
}

const share = (value: number) => Math.round(value * 1000) / 1000;
const summary = (figures: ServiceFigures) => `${share(figures.okShare)} ok, p99 ${Math.round(figures.p99LatencyMs)} ms (${figures.arrivals} tasks)`;

/** The windows after the incident, one a second, for the report: "+<s> s: <ok share>/<p99 ms>". */
function windowsTrace(windowsFromEnd: readonly ServiceWindow[]): string {
  const stepsPerSecond = 1000 / windowStepMs;
  return windowsFromEnd
    .filter((_, i) => i % stepsPerSecond === 0)
    .map((w, second) => `+${second} s: ${share(w.okShare)}/${Math.round(w.p99LatencyMs)}`)
    .join(', ');
}

/** What the ledger samples since `fromMs` tell: the sample that counted most past the bound (undefined: none), and the largest excess over the running tasks. */
function ledgerFigures(samples: readonly LedgerSample[], fromMs: number) {
  const sinceLoad = samples.filter((s) => s.atMs >= fromMs);
  const worst = sinceLoad.reduce<LedgerSample | undefined>((a, b) => (a && countedPastBound(a) >= countedPastBound(b) ? a : b), undefined);
  const closeReads = sinceLoad.filter((s) => s.scrapeMs <= maxScrapeMs);
  return {
    worst,
    figures: {
      ledgerSamples: sinceLoad.length,
      longestLedgerSampleGapMs: longestSampleGapMs(sinceLoad),
      mostSlotsCountedPastBound: worst ? countedPastBound(worst) : Number.NaN,
      largestLedgerExcessSlots: Math.max(...closeReads.map(ledgerExcess)),
    },
  };
}

test('an incident, then recovery: throughput and p99 back within 3 heartbeat periods of its end, and the ledger counts no slot longer', async (t) => {
  const startedAtMs = performance.now();
  const stack = await startFleet(t);
  const log = new TaskLog();
  const watch = new FleetWatch(stack, ledgerSampleIntervalMs, { ledger: { inTransitMs, leaseBoundMs } }).start();
  const times = await runLoad(t, stack, log);

  const before = serviceBetween(log, times.loadStartMs + phasesMs.settle, times.incidentFromMs);
  const during = serviceBetween(log, times.incidentFromMs, times.incidentToMs);
  const duringOthers = serviceBetween(log, times.incidentFromMs, times.incidentToMs, (s) => s.task.integration !== slowIntegration);
  const afterBound = serviceBetween(log, times.incidentToMs + recoveryBoundMs, times.loadEndMs);
  const p99BoundMs = p99Factor * before.p99LatencyMs + p99MarginMs;
  const isHealthy = (w: ServiceWindow) => w.okShare >= healthyOkShare && w.p99LatencyMs <= p99BoundMs;
  const afterWindows = serviceWindows(log, times.incidentToMs, times.loadEndMs, windowMs, windowStepMs);
  // Back: the first healthy window after the end. Stayed: from then on every window was (a busy
  // machine may stall one window now and then; the goal is judged on the span after the bound).
  const firstHealthy = afterWindows.find(isHealthy);
  const recoveredAfterMs = firstHealthy === undefined ? -1 : Math.round(firstHealthy.fromMs - times.incidentToMs);
  const stayedHealthyFrom = healthyFromMs(afterWindows, isHealthy);
  const stayedHealthyAfterMs = stayedHealthyFrom === undefined ? -1 : Math.round(stayedHealthyFrom - times.incidentToMs);
  const deadlines = await deadlineCounts(stack, log);
  // The load is over: what the watch reads from here on is the fleet at rest.
  const ledger = ledgerFigures(watch.ledgerSamples, times.loadStartMs);

  await finishCase(t, stack, log, watch, {
    name: 'an incident, then recovery (one integration 10x slower)',
    startedAtMs,
    measuredMs: {
      p99Before: Math.round(before.p99LatencyMs),
      p99During: Math.round(during.p99LatencyMs),
      p99AfterBound: Math.round(afterBound.p99LatencyMs),
      recoveredAfterIncidentEnd: recoveredAfterMs,
      everyWindowHealthyAfterIncidentEnd: stayedHealthyAfterMs,
      recoveryBound: recoveryBoundMs,
    },
    figures: {
      heartbeatPeriodMs,
      before: summary(before),
      during: summary(during),
      duringOtherIntegrations: summary(duringOthers),
      afterBound: summary(afterBound),
      windowsAfterEnd: windowsTrace(afterWindows),
      ...deadlines,
      ...ledger.figures,
      skippedTicks: times.skippedTicks,
    },
  });

  // The premises: the load was as planned and healthy before; the incident did what it should.
  assert.equal(times.skippedTicks, 0, 'every arrival was sent (open loop)');
  assert.ok(before.okShare >= 0.99, `healthy before the incident: ${summary(before)}`);
  assert.ok(
    deadlines.expiredRunning > 0 && deadlines.expiredBeforeStart > 0,
    `deadlines passed both while tasks ran and before they started: ${JSON.stringify(deadlines)}`,
  );
  assert.ok(during.okShare < healthyOkShare, `the incident degraded service: ${summary(during)}`);
  // The ledger, throughout (read at least once in any 3 periods): no slot counted past the bound.
  assert.ok(ledger.worst && ledger.figures.longestLedgerSampleGapMs <= recoveryBoundMs, `the ledger was read throughout: ${JSON.stringify(ledger.figures)}`);
  const { workerId, atMs, countedInFlight, runningTasks, leasesWithinBound } = ledger.worst;
  assert.ok(
    countedPastBound(ledger.worst) <= 0,
    `${workerId}, ${Math.round(atMs - times.incidentToMs)} ms after the incident's end: the ledger counted ${countedInFlight} slots, the worker ran ${runningTasks} tasks, ` +
      `and ${leasesWithinBound} leases were reserved in the last ${leaseBoundMs} ms (task deadline + 3 heartbeat periods)`,
  );
  // The goal: service as before within 3 heartbeat periods of the incident's end, and from then on.
  const healthy = `healthy: ok share >= ${healthyOkShare}, p99 <= ${Math.round(p99BoundMs)} ms`;
  assert.ok(
    firstHealthy !== undefined && recoveredAfterMs <= recoveryBoundMs,
    `service back ${recoveredAfterMs} ms after the incident's end (bound ${recoveryBoundMs} ms; ${healthy}): ${windowsTrace(afterWindows)}`,
  );
  assert.ok(
    afterBound.okShare >= healthyOkShare && afterBound.p99LatencyMs <= p99BoundMs,
    `from ${recoveryBoundMs} ms after the incident's end to the load's end: ${summary(afterBound)} (${healthy}): ${windowsTrace(afterWindows)}`,
  );
});

/**
 * rollback: how fast POST /rollback takes the candidate cluster out of service. Three balancers
 * and the workers, each its own process, under open-loop load on one integration, all of it on
 * the candidate cluster; the control plane and a real Unleash server processes of their own too.
 *   1. comparison: the same change through the flag alone (PUT /traffic to 0%), timed until every
 *      balancer routes a probe to the baseline: what flag polling takes;
 *   2. rollbacks: POST /rollback, timed to the last balancer's acknowledgement; then the workers'
 *      own records are checked for candidate tasks started after it; POST /resume and wait until
 *      every balancer routes to the candidate again. Repeated.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { sleep } from '@headroom/common';
import type { DurableState, RollbackRecord } from '@headroom/control-plane';
import { Cleanups } from './fleet/cleanups';
import { startControlStack } from './fleet/control-stack';
import { benchPlace, startProcessFleet, type WorkerGroup } from './fleet/headroom-fleet';
import { RouteProbe } from './fleet/route-probe';
import { TaskStartReader, taskStartsDirEnv, type TaskStart } from './fleet/task-starts';
import { LoadGenerator } from './load/generator';
import type { PhaseResult } from './load/protocol';
import type { Goal } from './report/goals';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';
import { figures, type Figures } from './report/stats';

export interface RollbackSettings {
  balancerCount: number;
  workers: readonly WorkerGroup[];
  /** The one integration the load uses and the flag sends to the candidate. */
  integration: string;
  /** The balancers' --flags-refresh-interval-ms (their default). */
  flagsRefreshIntervalMs: number;
  load: {
    tasksPerSecond: number;
    /** Each task sleeps this long in the worker (demo handler). */
    taskSleepMs: number;
    maxOutstanding: number;
    callTimeoutMs: number;
    /** Load before the first measurement. */
    warmupMs: number;
    /** The load stops when the measurements end; this bounds it whatever happens. */
    maxDurationMs: number;
  };
  rollbacks: number;
  /** Load on the candidate, every balancer routing there, before each rollback. */
  leadInMs: number;
  /** Load kept up after each rollback's answer, before the workers' records are read. */
  holdMs: number;
  pollingRepetitions: number;
  probe: { intervalMs: number; probeTimeoutMs: number; waitTimeoutMs: number };
}

export const fullSettings: RollbackSettings = {
  balancerCount: 3,
  workers: [
    { cluster: 'candidate', count: 2, maxParallelismPerWorker: 32 },
    { cluster: 'baseline', count: 1, maxParallelismPerWorker: 64 },
  ],
  integration: 'bank-a',
  flagsRefreshIntervalMs: 1000,
  load: { tasksPerSecond: 150, taskSleepMs: 30, maxOutstanding: 1024, callTimeoutMs: 10_000, warmupMs: 2000, maxDurationMs: 240_000 },
  rollbacks: 20,
  leadInMs: 500,
  holdMs: 500,
  pollingRepetitions: 5,
  probe: { intervalMs: 20, probeTimeoutMs: 2000, waitTimeoutMs: 10_000 },
};

/** Seconds of measuring (Unleash takes a few more to start): proves the benchmark runs end to end. */
export const smokeSettings: RollbackSettings = {
  ...fullSettings,
  load: { ...fullSettings.load, tasksPerSecond: 60, warmupMs: 300, maxDurationMs: 60_000 },
  rollbacks: 3,
  leadInMs: 300,
  holdMs: 300,
  pollingRepetitions: 1,
};

export const goals = { toLastAckP99Ms: 50, answerP99Ms: 50, candidateStartsAfterAck: 0 } as const;

export interface RollbackSample {
  /** From sending POST /rollback to the last balancer's acknowledgement as recorded in Redis (wall clock, 1 ms steps). */
  toLastAckMs: number;
  /** The control plane's own figure: from the start of its override change (after reading the state) to the last acknowledgement it heard of. */
  propagationMs: number;
  /** POST /rollback sent to answer received, here: every balancer acknowledged; Unleash is written after it. */
  roundTripMs: number;
  acknowledgedBy: string[];
  missing: string[];
  /** From sending POST /rollback until GET /traffic showed the Unleash write done (polled every 10 ms). */
  durableMs: number;
  /** The Unleash write's outcome. */
  durable: DurableState;
  /** Candidate tasks the workers started in the lead-in: the rollback met candidate traffic. */
  candidateStartsInLeadIn: number;
  /** Tasks the workers started after the acknowledgement, until the records were read (holdMs after the answer). */
  candidateStartsAfterAck: number;
  /**
   * The first few of those: when each started, and when its client sent it (from its deadline), relative to the
   * acknowledgement. Sent before it: the task may have been on its way to the worker already.
   */
  lateCandidateStarts: { startedMs: number; sentMs: number }[];
  /** Of those, the ones sent after the acknowledgement: routed to the candidate by a balancer that had applied the rollback. */
  candidateStartsSentAfterAck: number;
  baselineStartsAfterAck: number;
  /** The acknowledgement minus the last candidate start before it; null when there was none. */
  lastCandidateStartBeforeAckMs: number | null;
  /** POST /resume sent to answer received: every balancer lifted the override. */
  resumeRoundTripMs: number;
  /** From POST /resume until every balancer routed the probe to the candidate again (flag polling). */
  backOnCandidateMs: number;
}

export interface PollingSample {
  /** PUT /traffic round trip. */
  requestMs: number;
  /** From sending PUT /traffic until each balancer routed the probe to the baseline. */
  perBalancerMs: number[];
  allBalancersMs: number;
}

export interface RollbackResult extends RunHeader<'rollback', RollbackSettings> {
  rollbacks: RollbackSample[];
  toLastAck: Figures;
  propagation: Figures;
  roundTrip: Figures;
  durable: Figures;
  resumeRoundTrip: Figures;
  backOnCandidate: Figures;
  /** Over all rollbacks. */
  candidateStartsAfterAck: number;
  candidateStartsSentAfterAck: number;
  acknowledgedByAllEveryTime: boolean;
  polling: { samples: PollingSample[]; allBalancers: Figures };
  /** Flag polling's median over the rollback's median, both from sending the request. */
  pollingToRollbackRatio: number;
  /** The load over the whole measurement, comparison and rollbacks. */
  load: Pick<PhaseResult, 'calls' | 'succeeded' | 'errorsByCode' | 'dropped' | 'tasksPerSecond' | 'latency'>;
  goals: Goal[];
}

export type RollbackOptions = BenchmarkOptions;

const recordingHandlers = path.join(__dirname, 'fleet', 'recording-handlers.js');
const readyTimeoutMs = 20_000;

/** Sorts the records of one rollback by window; `callTimeoutMs` is what the load's clients add to the send time to make a deadline. */
function classify(starts: readonly TaskStart[], window: { leadInFromUnixMs: number; requestUnixMs: number; ackUnixMs: number }, callTimeoutMs: number) {
  const candidate = starts.filter((s) => s.cluster === 'candidate');
  const beforeAck = candidate.filter((s) => s.startedAtUnixMs <= window.ackUnixMs).map((s) => s.startedAtUnixMs);
  const afterAck = candidate.filter((s) => s.startedAtUnixMs > window.ackUnixMs);
  return {
    candidateStartsInLeadIn: candidate.filter((s) => s.startedAtUnixMs >= window.leadInFromUnixMs && s.startedAtUnixMs <= window.requestUnixMs).length,
    candidateStartsAfterAck: afterAck.length,
    lateCandidateStarts: afterAck
      .slice(0, 10)
      .map((s) => ({ startedMs: s.startedAtUnixMs - window.ackUnixMs, sentMs: s.deadlineUnixMs - callTimeoutMs - window.ackUnixMs })),
    candidateStartsSentAfterAck: afterAck.filter((s) => s.deadlineUnixMs - callTimeoutMs > window.ackUnixMs).length,
    baselineStartsAfterAck: starts.filter((s) => s.cluster === 'baseline' && s.startedAtUnixMs > window.ackUnixMs).length,
    lastCandidateStartBeforeAckMs: beforeAck.length === 0 ? null : window.ackUnixMs - beforeAck.reduce((latest, at) => Math.max(latest, at)),
  };
}

/** " (sent -30 ms, started +6 ms)": relative to the acknowledgement. */
export function formatLateStart(start: { startedMs: number; sentMs: number }): string {
  const signed = (ms: number) => `${ms >= 0 ? '+' : ''}${ms}`;
  return ` (sent ${signed(start.sentMs)} ms, started ${signed(start.startedMs)} ms)`;
}

export async function runRollback(options: RollbackOptions): Promise<RollbackResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const run = await startRun('rollback', options, settings);
  const { keyPrefix, logDir } = benchPlace('rollback');
  const startsDir = path.join(logDir, 'task-starts');
  fs.mkdirSync(startsDir, { recursive: true });
  const cleanups = new Cleanups();
  const { progress, signal } = options;
  const { integration } = settings;

  try {
    progress(`starting Unleash and the control plane (key prefix ${keyPrefix}, logs in ${logDir})`);
    const control = await startControlStack(keyPrefix, { redisUrl: options.redisUrl, integrations: [integration], logDir }, cleanups.register);
    signal.throwIfAborted();
    const workerCount = settings.workers.reduce((sum, group) => sum + group.count, 0);
    progress(`starting ${settings.balancerCount} balancers and ${workerCount} workers`);
    const fleet = await startProcessFleet(
      keyPrefix,
      {
        redisUrl: options.redisUrl,
        workers: settings.workers,
        balancerCount: settings.balancerCount,
        handlersPath: recordingHandlers,
        workerEnv: { [taskStartsDirEnv]: startsDir },
        logDir,
        balancerArgs: [
          '--unleash-url',
          control.unleash.url,
          '--unleash-client-token',
          control.unleash.clientToken,
          '--flags-refresh-interval-ms',
          String(settings.flagsRefreshIntervalMs),
        ],
      },
      cleanups.register,
    );
    signal.throwIfAborted();
    const balancerAddresses = fleet.balancers.map((b) => b.address);
    const probe = new RouteProbe(balancerAddresses, { integration, intervalMs: settings.probe.intervalMs, probeTimeoutMs: settings.probe.probeTimeoutMs });
    cleanups.register(async () => probe.close());
    await probe.waitForReady(readyTimeoutMs);
    const generator = await LoadGenerator.start({
      balancerAddresses,
      workers: [],
      task: { integration, payload: JSON.stringify({ sleepMs: settings.load.taskSleepMs }) },
      callTimeoutMs: settings.load.callTimeoutMs,
    });
    cleanups.register(() => generator.close());

    const routedTo = (cluster: string, sinceMs: number) => probe.untilAllRouteTo(cluster, sinceMs, settings.probe.waitTimeoutMs, signal);
    /** When the last balancer that answered `record` acknowledged it: read before anything else changes the override. */
    const lastAcknowledgement = async (record: RollbackRecord) => {
      const acks = new Map((await control.acknowledgements()).map((ack) => [ack.balancerId, ack]));
      const times = record.acknowledged.map(({ balancerId }) => {
        const ack = acks.get(balancerId);
        if (ack?.version !== record.overrideVersion)
          throw new Error(`balancer ${balancerId}: acknowledgement of version ${record.overrideVersion} not found in Redis (${JSON.stringify(ack)})`);
        return ack.ackedAtUnixMs;
      });
      return Math.max(...times);
    };
    /** Polls GET /traffic until the rollback's Unleash write is done or failed. */
    const durableOutcome = async (record: RollbackRecord, sentAt: number): Promise<{ durable: DurableState; durableMs: number }> => {
      const deadline = performance.now() + settings.probe.waitTimeoutMs;
      for (;;) {
        const last = (await control.api.traffic()).lastRollback;
        if (last?.overrideVersion === record.overrideVersion && last.durable !== 'pending')
          return { durable: last.durable, durableMs: performance.now() - sentAt };
        if (performance.now() > deadline)
          throw new Error(`rollback version ${record.overrideVersion}: Unleash not written after ${settings.probe.waitTimeoutMs} ms`);
        await sleep(10, signal);
      }
    };
    const setPercent = (percent: number) => control.api.setTraffic({ integrations: { [integration]: percent } });
    await setPercent(100);
    await routedTo('candidate', performance.now());

    const { load } = settings;
    const stopLoad = new AbortController();
    let loadRunning = true;
    const loadDone = generator.run(
      {
        kind: 'open',
        target: 'balancer',
        tasksPerSecond: load.tasksPerSecond,
        warmupMs: 0,
        durationMs: load.maxDurationMs,
        maxOutstanding: load.maxOutstanding,
      },
      signal,
      stopLoad.signal,
    );
    loadDone.then(
      () => (loadRunning = false),
      () => (loadRunning = false),
    );
    const loadStillRunning = () => {
      if (!loadRunning) throw new Error(`the load ended before the measurements did (load.maxDurationMs ${load.maxDurationMs})`);
    };
    progress(`load: ${load.tasksPerSecond} tasks/s over ${settings.balancerCount} balancers, ${integration}, ${load.taskSleepMs} ms each`);
    await sleep(load.warmupMs, signal);

    // 1. The comparison: the same change through flag polling alone.
    const polling: PollingSample[] = [];
    for (let repetition = 1; repetition <= settings.pollingRepetitions; repetition++) {
      loadStillRunning();
      const sentAt = performance.now();
      await setPercent(0);
      const requestMs = performance.now() - sentAt;
      const perBalancerMs = await routedTo('baseline', sentAt);
      const sample = { requestMs, perBalancerMs, allBalancersMs: Math.max(...perBalancerMs) };
      polling.push(sample);
      progress(
        `flag polling #${repetition}: every balancer on the baseline after ${sample.allBalancersMs.toFixed(0)} ms (PUT /traffic took ${requestMs.toFixed(1)} ms)`,
      );
      await setPercent(100);
      await routedTo('candidate', performance.now());
    }

    // 2. Rollbacks.
    const reader = new TaskStartReader(startsDir);
    reader.readNew();
    const samples: RollbackSample[] = [];
    let leadInFromUnixMs = Date.now();
    for (let rollback = 1; rollback <= settings.rollbacks; rollback++) {
      loadStillRunning();
      await sleep(settings.leadInMs, signal);
      // Wall clock, as the workers' records and the acknowledgements in Redis: one machine, one clock.
      const requestUnixMs = Date.now();
      const sentAt = performance.now();
      const record = await control.api.rollback();
      const roundTripMs = performance.now() - sentAt;
      if (record.propagationMs === null) throw new Error(`rollback #${rollback}: no balancer acknowledged (missing: ${record.missing.join(', ')})`);
      const ackUnixMs = await lastAcknowledgement(record);
      const { durable, durableMs } = await durableOutcome(record, sentAt);
      await sleep(Math.max(0, settings.holdMs - (performance.now() - sentAt - roundTripMs)), signal);
      const counts = classify(reader.readNew(), { leadInFromUnixMs, requestUnixMs, ackUnixMs }, load.callTimeoutMs);

      const resumeSentAt = performance.now();
      await control.api.resume();
      const resumeRoundTripMs = performance.now() - resumeSentAt;
      const backOnCandidateMs = Math.max(...(await routedTo('candidate', resumeSentAt)));
      leadInFromUnixMs = Date.now();
      const sample: RollbackSample = {
        toLastAckMs: ackUnixMs - requestUnixMs,
        propagationMs: record.propagationMs,
        roundTripMs,
        acknowledgedBy: record.acknowledged.map((a) => a.balancerId),
        missing: record.missing,
        durableMs,
        durable,
        ...counts,
        resumeRoundTripMs,
        backOnCandidateMs,
      };
      samples.push(sample);
      progress(
        `rollback #${rollback}: last ack after ${sample.toLastAckMs} ms (control plane: ${sample.propagationMs.toFixed(1)} ms; answer after ${roundTripMs.toFixed(1)} ms; Unleash ${durable} after ${durableMs.toFixed(0)} ms), acks ${sample.acknowledgedBy.length}, ` +
          `candidate starts: ${sample.candidateStartsInLeadIn} before, ${sample.candidateStartsAfterAck} after${sample.lateCandidateStarts.map(formatLateStart).join('')}; resume answered after ${resumeRoundTripMs.toFixed(1)} ms, back on the candidate ${backOnCandidateMs.toFixed(0)} ms after it`,
      );
    }
    stopLoad.abort();
    const loadResult = await loadDone;

    const toLastAck = figures(samples.map((s) => s.toLastAckMs));
    const roundTrip = figures(samples.map((s) => s.roundTripMs));
    const resumeRoundTrip = figures(samples.map((s) => s.resumeRoundTripMs));
    const pollingAll = figures(polling.map((s) => s.allBalancersMs));
    const total = (count: (s: RollbackSample) => number) => samples.reduce((sum, s) => sum + count(s), 0);
    const candidateStartsAfterAck = total((s) => s.candidateStartsAfterAck);
    const acknowledgedByAllEveryTime = samples.every((s) => s.acknowledgedBy.length === settings.balancerCount && s.missing.length === 0);
    return {
      ...run.header(),
      rollbacks: samples,
      toLastAck,
      propagation: figures(samples.map((s) => s.propagationMs)),
      roundTrip,
      durable: figures(samples.map((s) => s.durableMs)),
      resumeRoundTrip,
      backOnCandidate: figures(samples.map((s) => s.backOnCandidateMs)),
      candidateStartsAfterAck,
      candidateStartsSentAfterAck: total((s) => s.candidateStartsSentAfterAck),
      acknowledgedByAllEveryTime,
      polling: { samples: polling, allBalancers: pollingAll },
      pollingToRollbackRatio: pollingAll.medianMs / toLastAck.medianMs,
      load: {
        calls: loadResult.calls,
        succeeded: loadResult.succeeded,
        errorsByCode: loadResult.errorsByCode,
        dropped: loadResult.dropped,
        tasksPerSecond: loadResult.tasksPerSecond,
        latency: loadResult.latency,
      },
      goals: [
        {
          name: `POST /rollback to the last acknowledgement, p99 of ${samples.length}`,
          target: `<= ${goals.toLastAckP99Ms} ms`,
          measured: toLastAck.p99Ms,
          met: toLastAck.p99Ms <= goals.toLastAckP99Ms,
        },
        {
          name: `POST /rollback sent to its answer (client side), p99 of ${samples.length}`,
          target: `<= ${goals.answerP99Ms} ms`,
          measured: roundTrip.p99Ms,
          met: roundTrip.p99Ms <= goals.answerP99Ms,
        },
        {
          name: `POST /resume sent to its answer (client side), p99 of ${samples.length}`,
          target: `<= ${goals.answerP99Ms} ms`,
          measured: resumeRoundTrip.p99Ms,
          met: resumeRoundTrip.p99Ms <= goals.answerP99Ms,
        },
        {
          name: 'candidate tasks started after the last acknowledgement',
          target: `= ${goals.candidateStartsAfterAck}`,
          measured: candidateStartsAfterAck,
          met: candidateStartsAfterAck === goals.candidateStartsAfterAck,
        },
      ],
    };
  } finally {
    await cleanups.runAll();
  }
}

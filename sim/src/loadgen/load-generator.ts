/**
 * Open-loop load: tasks are sent on a fixed schedule whatever the answers do, as real
 * clients would, so a slow system shows up as latency and errors, not as a lower rate.
 * Calls awaiting answers are bounded; a task due beyond the bound is dropped and counted.
 * Each task counts in the phase (steady or spike) it fell due in.
 */
import { setMaxListeners } from 'node:events';
import { once, parseConfig } from '@headroom/common';
import type { BalancerClient, Task } from '@headroom/proto';
import { FiguresCounter, type LoadFigures, type TaskPriority } from './figures';
import { OpenLoop, type DroppedCalls, type DueCall } from './open-loop';
import { loadGeneratorOptionsSchema, type LoadGeneratorConfig, type LoadGeneratorOptions } from './options';
import { SendSchedule, priorities, type LoadPhase } from './schedule';
import { connectBalancer, submitTask } from './submit';
import { Workload } from './workload';

export interface PhaseFigures extends LoadFigures {
  /** Tasks per second due in this phase, both priorities. */
  targetRatePerS: number;
}

export interface LoadReport {
  /** Since the previous report (or the start). */
  window: LoadFigures;
  /** Since the start. */
  total: LoadFigures;
  /** The steady rate; a spike raises the background share of it (see `phases`). */
  targetRatePerS: number;
  outstandingCalls: number;
  /** The phase tasks are being sent in now. */
  phase: LoadPhase;
  /** Since the start, by the phase each task fell due in: `spike` stays empty (0 s) without spikes. */
  phases: Record<LoadPhase, PhaseFigures>;
}

export interface LoadGenerator {
  readonly config: LoadGeneratorConfig;
  readonly outstandingCalls: number;
  /** Figures since the previous call, and since the start. */
  report(): LoadReport;
  /** Stops sending, waits up to drainTimeoutMs for answers, cancels the rest. Idempotent. */
  close(): Promise<LoadReport>;
}

export interface LoadGeneratorDependencies {
  /** A client to use for every task (not closed by the generator); by default one is made for each of balancerAddresses. */
  client?: BalancerClient;
  random?: () => number;
}

const tickMs = 10;
/** After the drain, how long cancelled calls get to answer CANCELLED (counted). */
const cancelledAnswerWaitMs = 1000;

export function startLoadGenerator(options: LoadGeneratorOptions, dependencies: LoadGeneratorDependencies = {}): LoadGenerator {
  const config = parseConfig('load generator options', loadGeneratorOptionsSchema, options);
  const clients: BalancerClient[] = dependencies.client ? [dependencies.client] : config.balancerAddresses.map(connectBalancer);
  let sentCount = 0;
  const workload = new Workload(config, dependencies.random);
  const schedule = new SendSchedule(config);
  const cancel = new AbortController();
  // Every call awaiting its answer listens for the cancel.
  setMaxListeners(config.maxOutstandingCalls + 1, cancel.signal);
  const total = new FiguresCounter();
  const phases: Record<LoadPhase, FiguresCounter> = { steady: new FiguresCounter(), spike: new FiguresCounter() };
  let window = new FiguresCounter();
  // Rates are over the time tasks were being sent, not the drain after it.
  let stoppedSendingAtMs: number | undefined;

  const count = (phase: LoadPhase, fn: (counter: FiguresCounter) => void) => {
    fn(total);
    fn(window);
    fn(phases[phase]);
  };

  const send = async (task: Task, phase: LoadPhase) => {
    const priority = task.priority as TaskPriority;
    const sentAtMs = performance.now();
    count(phase, (c) => c.countSent(priority));
    // In turn: each balancer gets an equal share of either priority's tasks.
    const client = clients[sentCount++ % clients.length]!;
    const answer = await submitTask(client, task, { signal: cancel.signal });
    if (!answer.ok) return count(phase, (c) => c.countRejected(priority, answer.code));
    const latencyMs = performance.now() - sentAtMs;
    const cluster = answer.placement?.cluster || 'unknown';
    const errorCode = answer.response.error ? answer.response.error.code || 'UNKNOWN' : undefined;
    count(phase, (c) => c.countCompleted(cluster, priority, latencyMs, errorCode));
  };

  // A task counts in the phase it fell due in: a late timer that sends a spike's tasks after the
  // spike ended (a loaded machine) must not count them as steady ones.
  const phaseDue = (index: number, sequence: number, sentAtMs: number): LoadPhase =>
    schedule.hasSpikes ? schedule.phaseAt(schedule.dueAtMs(priorities[index]!, sequence, sentAtMs)) : 'steady';
  // User-present first: when the outstanding limit bites, background tasks are the ones dropped.
  const loop = new OpenLoop({
    schedules: priorities.map((priority) => ({
      dueBy: (elapsedMs: number) => schedule.dueBy(priority, elapsedMs),
      // More than a second of tasks due at once means the process stalled: send one second's worth.
      maxBurst: { calls: Math.max(1, Math.ceil(schedule.peakRatePerS(priority))), pastDue: 'drop' as const },
    })),
    maxOutstandingCalls: config.maxOutstandingCalls,
    tickMs,
    send: ({ schedule: index, sequence, elapsedMs }: DueCall) => send(workload.next(Date.now(), priorities[index]!), phaseDue(index, sequence, elapsedMs)),
    onDropped: ({ schedule: index, firstSequence, reason, calls, elapsedMs }: DroppedCalls) =>
      count(phaseDue(index, firstSequence, elapsedMs), (c) => c.countDropped(reason, calls)),
  });
  const startedAtMs = loop.startedAtMs;
  let windowStartedAtMs = startedAtMs;

  const report = (): LoadReport => {
    const now = stoppedSendingAtMs ?? performance.now();
    const elapsedMs = now - startedAtMs;
    const phaseSeconds = schedule.phaseSeconds(elapsedMs);
    const result: LoadReport = {
      window: window.figures((now - windowStartedAtMs) / 1000),
      total: total.figures(elapsedMs / 1000),
      targetRatePerS: config.ratePerS,
      outstandingCalls: loop.outstandingCalls,
      phase: schedule.phaseAt(elapsedMs),
      phases: {
        steady: { ...phases.steady.figures(phaseSeconds.steady), targetRatePerS: schedule.targetRatePerS('steady') },
        spike: { ...phases.spike.figures(phaseSeconds.spike), targetRatePerS: schedule.targetRatePerS('spike') },
      },
    };
    window = new FiguresCounter();
    windowStartedAtMs = now;
    return result;
  };

  const close = once(async () => {
    loop.stop();
    stoppedSendingAtMs = performance.now();
    if (!(await loop.idle(config.drainTimeoutMs))) {
      // Cancelled calls answer CANCELLED (counted) on a later tick; wait for that, briefly.
      cancel.abort();
      await loop.idle(cancelledAnswerWaitMs);
    }
    if (!dependencies.client) for (const client of clients) client.close();
    return report();
  });

  return {
    config,
    get outstandingCalls() {
      return loop.outstandingCalls;
    },
    report,
    close,
  };
}

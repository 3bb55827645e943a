/**
 * Open-loop load: tasks are sent on a fixed schedule whatever the answers do, as real
 * clients would, so a slow system shows up as latency and errors, not as a lower rate.
 * Calls awaiting answers are bounded; a task due beyond the bound is dropped and counted.
 * Each task counts in the phase (steady or spike) it was sent in.
 */
import * as grpc from '@grpc/grpc-js';
import { once, parseConfig } from '@headroom/common';
import { BalancerService, metadataKeys, type BalancerClient, type Task } from '@headroom/proto';
import { FiguresCounter, type LoadFigures, type TaskPriority } from './figures';
import { loadGeneratorOptionsSchema, type LoadGeneratorConfig, type LoadGeneratorOptions } from './options';
import { SendSchedule, priorities, type LoadPhase } from './schedule';
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
  /** Since the start, by the phase each task was sent in: `spike` stays empty (0 s) without spikes. */
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
/** The gRPC deadline leaves the balancer time to answer with its own coded error first. */
const callDeadlineMarginMs = 1000;

export function startLoadGenerator(options: LoadGeneratorOptions, dependencies: LoadGeneratorDependencies = {}): LoadGenerator {
  const config = parseConfig('load generator options', loadGeneratorOptionsSchema, options);
  const clients: BalancerClient[] = dependencies.client
    ? [dependencies.client]
    : config.balancerAddresses.map((address) => new BalancerService(address, grpc.credentials.createInsecure()));
  let sentCount = 0;
  const workload = new Workload(config, dependencies.random);
  const schedule = new SendSchedule(config);
  const calls = new Set<grpc.ClientUnaryCall>();
  const startedAtMs = performance.now();
  const total = new FiguresCounter();
  const phases: Record<LoadPhase, FiguresCounter> = { steady: new FiguresCounter(), spike: new FiguresCounter() };
  let window = new FiguresCounter();
  let windowStartedAtMs = startedAtMs;
  const scheduled: Record<TaskPriority, number> = { USER_PRESENT: 0, BACKGROUND: 0 };
  let onIdle: (() => void) | undefined;
  // Rates are over the time tasks were being sent, not the drain after it.
  let stoppedSendingAtMs: number | undefined;
  // More than a second of tasks due at once means the process stalled: send one second's worth.
  const maxBurst = (priority: TaskPriority) => Math.max(1, Math.ceil(schedule.peakRatePerS(priority)));

  const count = (phase: LoadPhase, fn: (counter: FiguresCounter) => void) => {
    fn(total);
    fn(window);
    fn(phases[phase]);
  };

  const send = (task: Task, phase: LoadPhase) => {
    const priority = task.priority as TaskPriority;
    const sentAtMs = performance.now();
    count(phase, (c) => c.countSent(priority));
    // In turn: each balancer gets an equal share of either priority's tasks.
    const client = clients[sentCount++ % clients.length]!;
    const call = client.submit({ task }, { deadline: Date.now() + config.taskTimeoutMs + callDeadlineMarginMs }, (error, response) => {
      calls.delete(call);
      if (error) {
        const coded = error.metadata?.get(metadataKeys.errorCode)[0];
        const code = coded === undefined ? `GRPC_${grpc.status[error.code] ?? error.code}` : String(coded);
        count(phase, (c) => c.countRejected(priority, code));
      } else {
        const latencyMs = performance.now() - sentAtMs;
        const cluster = response?.placement?.cluster || 'unknown';
        const errorCode = response?.error ? response.error.code || 'UNKNOWN' : undefined;
        count(phase, (c) => c.countCompleted(cluster, priority, latencyMs, errorCode));
      }
      if (calls.size === 0) onIdle?.();
    });
    calls.add(call);
  };

  const tick = () => {
    const elapsedMs = performance.now() - startedAtMs;
    const phase = schedule.phaseAt(elapsedMs);
    const now = Date.now();
    // User-present first: when the outstanding limit bites, background tasks are the ones dropped.
    for (const priority of priorities) {
      const due = schedule.dueBy(priority, elapsedMs) - scheduled[priority];
      if (due <= 0) continue;
      scheduled[priority] += due;
      const sending = Math.min(due, maxBurst(priority));
      if (due > sending) count(phase, (c) => c.countDropped('behind-schedule', due - sending));
      for (let i = 0; i < sending; i++) {
        if (calls.size >= config.maxOutstandingCalls) count(phase, (c) => c.countDropped('outstanding-limit'));
        else send(workload.next(now, priority), phase);
      }
    }
  };
  const timer = setInterval(tick, tickMs);
  timer.unref();

  const report = (): LoadReport => {
    const now = stoppedSendingAtMs ?? performance.now();
    const elapsedMs = now - startedAtMs;
    const phaseSeconds = schedule.phaseSeconds(elapsedMs);
    const result: LoadReport = {
      window: window.figures((now - windowStartedAtMs) / 1000),
      total: total.figures(elapsedMs / 1000),
      targetRatePerS: config.ratePerS,
      outstandingCalls: calls.size,
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
    clearInterval(timer);
    stoppedSendingAtMs = performance.now();
    if (calls.size > 0) {
      await new Promise<void>((resolve) => {
        const giveUp = setTimeout(resolve, config.drainTimeoutMs);
        giveUp.unref();
        onIdle = () => {
          clearTimeout(giveUp);
          resolve();
        };
      });
    }
    if (calls.size > 0) {
      // Cancelled calls answer CANCELLED (counted) on a later tick; wait for that, briefly.
      const cancelled = new Promise<void>((resolve) => {
        const giveUp = setTimeout(resolve, 1000);
        giveUp.unref();
        onIdle = () => {
          clearTimeout(giveUp);
          resolve();
        };
      });
      for (const call of calls) call.cancel();
      await cancelled;
    }
    if (!dependencies.client) for (const client of clients) client.close();
    return report();
  });

  return {
    config,
    get outstandingCalls() {
      return calls.size;
    },
    report,
    close,
  };
}

/**
 * Open-loop load: tasks are sent on a fixed schedule whatever the answers do, as real
 * clients would, so a slow system shows up as latency and errors, not as a lower rate.
 * Calls awaiting answers are bounded; a task due beyond the bound is dropped and counted.
 */
import * as grpc from '@grpc/grpc-js';
import { once, parseConfig } from '@headroom/common';
import { BalancerService, metadataKeys, type BalancerClient, type Task } from '@headroom/proto';
import { FiguresCounter, type LoadFigures, type TaskPriority } from './figures';
import { loadGeneratorOptionsSchema, type LoadGeneratorConfig, type LoadGeneratorOptions } from './options';
import { Workload } from './workload';

export interface LoadReport {
  /** Since the previous report (or the start). */
  window: LoadFigures;
  /** Since the start. */
  total: LoadFigures;
  targetRatePerS: number;
  outstandingCalls: number;
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
  /** A client to use (not closed by the generator); by default one is made for balancerAddress. */
  client?: BalancerClient;
  random?: () => number;
}

const tickMs = 10;
/** The gRPC deadline leaves the balancer time to answer with its own coded error first. */
const callDeadlineMarginMs = 1000;

export function startLoadGenerator(options: LoadGeneratorOptions, dependencies: LoadGeneratorDependencies = {}): LoadGenerator {
  const config = parseConfig('load generator options', loadGeneratorOptionsSchema, options);
  const client = dependencies.client ?? new BalancerService(config.balancerAddress, grpc.credentials.createInsecure());
  const workload = new Workload(config, dependencies.random);
  const calls = new Set<grpc.ClientUnaryCall>();
  const startedAtMs = performance.now();
  const total = new FiguresCounter(startedAtMs);
  let window = new FiguresCounter(startedAtMs);
  let scheduled = 0;
  let onIdle: (() => void) | undefined;
  // Rates are over the time tasks were being sent, not the drain after it.
  let stoppedSendingAtMs: number | undefined;
  // More than a second of tasks due at once means the process stalled: send one second's worth.
  const maxBurst = Math.max(1, Math.ceil(config.ratePerS));

  const count = (fn: (counter: FiguresCounter) => void) => {
    fn(total);
    fn(window);
  };

  const send = (task: Task) => {
    const priority = task.priority as TaskPriority;
    const sentAtMs = performance.now();
    count((c) => c.countSent());
    const call = client.submit({ task }, { deadline: Date.now() + config.taskTimeoutMs + callDeadlineMarginMs }, (error, response) => {
      calls.delete(call);
      if (error) {
        const coded = error.metadata?.get(metadataKeys.errorCode)[0];
        const code = coded === undefined ? `GRPC_${grpc.status[error.code] ?? error.code}` : String(coded);
        count((c) => c.countRejected(code));
      } else {
        const latencyMs = performance.now() - sentAtMs;
        const cluster = response?.placement?.cluster || 'unknown';
        const errorCode = response?.error ? response.error.code || 'UNKNOWN' : undefined;
        count((c) => c.countCompleted(cluster, priority, latencyMs, errorCode));
      }
      if (calls.size === 0) onIdle?.();
    });
    calls.add(call);
  };

  const tick = () => {
    const due = Math.floor(((performance.now() - startedAtMs) / 1000) * config.ratePerS) - scheduled;
    if (due <= 0) return;
    scheduled += due;
    const now = Date.now();
    const sending = Math.min(due, maxBurst);
    if (due > sending) count((c) => c.countDropped('behind-schedule', due - sending));
    for (let i = 0; i < sending; i++) {
      if (calls.size >= config.maxOutstandingCalls) count((c) => c.countDropped('outstanding-limit'));
      else send(workload.next(now));
    }
  };
  const timer = setInterval(tick, tickMs);
  timer.unref();

  const report = (): LoadReport => {
    const now = stoppedSendingAtMs ?? performance.now();
    const result = { window: window.figures(now), total: total.figures(now), targetRatePerS: config.ratePerS, outstandingCalls: calls.size };
    window = new FiguresCounter(now);
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
    if (!dependencies.client) client.close();
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

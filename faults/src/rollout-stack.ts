/**
 * A rollout on the bank workload, for the autopilot's scenarios (faults/test/rollout-*.test.ts)
 * and its benchmark: the bank simulator (a process), the control plane with a fast autopilot, a
 * balancer routing by the traffic flag, baseline and candidate workers running the bank handlers
 * (in this process, or as worker processes of their own: a small heap, their own CPU), and
 * closed-loop load of bank tasks through the balancer, bounded in count and time.
 */
import type { TestContext } from 'node:test';
import { ClosedLoop } from '@headroom/sim';
import { createBankHandlers } from '@headroom/sim/handlers/bank';
import type { RunningUnleash } from '@headroom/unleash-local';
import type { ControlPlaneOptions, Rollout } from '@headroom/control-plane';
import {
  cliPaths,
  eventually,
  handlersPaths,
  type ControlPlaneApi,
  json,
  spawnReady,
  startStack,
  submit,
  task,
  testRedisUrl,
  type ReadyProcess,
  type Stack,
} from '@headroom/testkit';
import { bankUrlEnv, startBankSimulator, type BankSimulatorProcess } from './bank';
import { readyTimeoutMs } from './stack';

/** The autopilot acts fast and reads settled latency soon: every worker here adds its latencies every 500 ms. */
export const rolloutControlPlaneOptions = {
  autopilotTickMs: 250,
  autopilotLeaseMs: 2000,
  latencySettleMs: 1500,
} as const satisfies Partial<ControlPlaneOptions>;
/** Latencies every 500 ms; runtime figures (GC, event loop, heap) every second: a shorter interval makes a single GC pause a large share of it. */
export const rolloutReportIntervals = { latencyReportIntervalMs: 500, reportIntervalMs: 1000 } as const;

/** Lines on the candidate workers' runtime that a shared test machine does not come near: for scenarios about something else. */
export const relaxedWorkerGates = { gcShare: 0.9, eventLoopUtilization: 1, eventLoopDelayP99Ms: 5000, heapShare: 0.95 } as const;

export interface BankWorkers {
  cluster: 'baseline' | 'candidate';
  count: number;
  /** Its own setting; the parallelism flag may override it. */
  maxParallelism: number;
  /** Run each as a worker process (headroom-worker) with these extra flags and env; absent: in this process. */
  asProcess?: { args?: string[]; env?: NodeJS.ProcessEnv };
}

export interface BankLoadOptions {
  integrations: string[];
  /** Tasks in flight at once (one lane each); lane i sends integrations[i % n]. */
  lanes: number;
  /** Each task's payload (see sim/src/handlers/bank.ts). @default {} */
  payload?: Record<string, unknown>;
  /** No task is sent after this. @default 170000 */
  maxDurationMs?: number;
}

export interface BankLoadTally {
  sent: number;
  ok: number;
  /** Failed answers by code. */
  failed: Record<string, number>;
}

export interface RolloutStack {
  stack: Stack;
  bank: BankSimulatorProcess;
  /** The worker processes, in the order of the specs. */
  workerProcesses: { cluster: string; workerId: string; process: ReadyProcess }[];
  /** Stops sending and resolves, once the last answer came, with what was answered. */
  stopLoad(): Promise<BankLoadTally>;
}

const maxLoadCalls = 500_000;

export async function startRolloutStack(
  t: TestContext,
  unleash: RunningUnleash,
  options: { workers: BankWorkers[]; load: BankLoadOptions; controlPlane?: Partial<ControlPlaneOptions>; bankTimeScale?: number },
): Promise<RolloutStack> {
  // Registered first, so it runs first: the load stops before the balancer and workers do.
  let stopLoadFirst: (() => Promise<unknown>) | undefined;
  t.after(() => stopLoadFirst?.());
  const bank = await startBankSimulator(t, 42, options.bankTimeScale ?? 1);
  const stack = await startStack(t, unleash, { ...rolloutControlPlaneOptions, ...options.controlPlane });
  const { fleet } = stack;
  const handlers = createBankHandlers({ bankUrl: bank.url }).handlers;
  const workerProcesses: RolloutStack['workerProcesses'] = [];
  for (const spec of options.workers) {
    for (let i = 0; i < spec.count; i++) {
      const workerId = `${spec.cluster}-${i}`;
      const reporting = rolloutReportIntervals;
      if (!spec.asProcess) {
        const { flags } = await stack.newFlagClient();
        await fleet.addWorker({ cluster: spec.cluster, workerId, maxParallelism: spec.maxParallelism, ...reporting }, handlers, flags);
        continue;
      }
      const process = await spawnReady(
        t,
        cliPaths.worker,
        [
          '--redis-url',
          testRedisUrl,
          '--key-prefix',
          fleet.ledgerOptions.keyPrefix!,
          '--cluster',
          spec.cluster,
          '--worker-id',
          workerId,
          '--handlers',
          handlersPaths.bank,
          '--max-parallelism',
          String(spec.maxParallelism),
          '--heartbeat-interval-ms',
          '200',
          '--latency-report-interval-ms',
          String(reporting.latencyReportIntervalMs),
          '--report-interval-ms',
          String(reporting.reportIntervalMs),
          '--unleash-url',
          unleash.url,
          '--unleash-client-token',
          unleash.clientToken,
          '--parallelism-flag',
          stack.flagNames.maxParallelism,
          '--flags-refresh-interval-ms',
          '200',
          ...(spec.asProcess.args ?? []),
        ],
        readyTimeoutMs,
        { [bankUrlEnv]: bank.url, ...spec.asProcess.env },
      );
      workerProcesses.push({ cluster: spec.cluster, workerId, process });
    }
  }
  const { flags } = await stack.newFlagClient();
  // The rollouts here move one or two integrations onto a candidate of one worker: the default
  // integration limit (half of a cluster) would cap the parallelism they search and judge.
  await fleet.addBalancer({ defaultIntegrationLimit: { off: true } }, flags);

  const { integrations, lanes, payload = {} } = options.load;
  const tally: BankLoadTally = { sent: 0, ok: 0, failed: {} };
  const loop = new ClosedLoop({
    lanes,
    maxCalls: maxLoadCalls,
    maxDurationMs: options.load.maxDurationMs ?? 170_000,
    call: async (sequence, lane) => {
      tally.sent++;
      const answer = await submit(
        fleet.clients[0]!,
        task({ integration: integrations[lane % integrations.length]!, key: `acc-${sequence}`, priority: 'BACKGROUND', payload: json(payload) }),
        15_000,
      ).catch((error: unknown) => {
        // The client was closed under the lane (the test is ending): nothing more to send.
        loop.stop();
        return { ok: false as const, code: `client: ${error instanceof Error ? error.message : String(error)}` };
      });
      const code = answer.ok ? answer.response.error?.code : answer.code || 'unknown';
      if (code === undefined) tally.ok++;
      else tally.failed[code] = (tally.failed[code] ?? 0) + 1;
      return answer;
    },
    // A refusal (no worker, queue full) comes back at once: a lane waits a little before its next.
    pauseAfterMs: (answer) => (answer.ok ? 0 : 100),
  });
  let stopped: Promise<BankLoadTally> | undefined;
  const stopLoad = () =>
    (stopped ??= (async () => {
      loop.stop();
      await loop.finished();
      return { ...tally, failed: { ...tally.failed } };
    })());
  stopLoadFirst = stopLoad;
  return { stack, bank, workerProcesses, stopLoad };
}

/** What a rollout says of itself, for an assertion's message: status, step, what it waits for, its decisions and last reading. */
export function describeRollout(rollout: Rollout): string {
  const { status, step, maxParallelism, rolledBack, waitingFor, decisions, lastReading } = rollout;
  return JSON.stringify(
    { status, step, maxParallelism, rolledBack, waitingFor, decisions: decisions.map((d) => `${d.kind} (step ${d.step}): ${d.message}`), lastReading },
    null,
    1,
  );
}

/**
 * Polls the rollout until `until` holds (then resolves with it) or `timeoutMs` passes (then
 * rejects, saying what the rollout waited for).
 */
export async function waitForRollout(
  api: ControlPlaneApi,
  id: string,
  what: string,
  timeoutMs: number,
  until: (rollout: Rollout) => boolean,
): Promise<Rollout> {
  let last: Rollout | undefined;
  try {
    return await eventually(what, timeoutMs, async () => {
      last = await api.rollout(id);
      // The state is written ahead of its actions (docs/rollouts.md): it holds once no intent is pending.
      return until(last) && !last.pending ? last : undefined;
    });
  } catch (error) {
    throw new Error(`${error instanceof Error ? error.message : String(error)}; the rollout: ${last ? describeRollout(last) : '(never read)'}`);
  }
}

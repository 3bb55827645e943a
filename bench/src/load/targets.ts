import * as grpc from '@grpc/grpc-js';
import { WorkerService, type BalancerClient, type Task, type WorkerClient } from '@headroom/proto';
import { connectBalancer, errorCodeOf, submitTask, type PlacementFigures, type SubmitAnswer } from '@headroom/sim';
import type { CallSettings, CallTarget } from './call-target';
import type { Priority, TargetName, Targets, TaskTemplate } from './protocol';
import { proxylessTarget } from './proxyless-target';

/** A Balancer.Submit answered: the cluster that ran the task and where, or why it failed (a handler's error counts as a failure). */
export type SubmitOutcome = { ok: true; cluster: string; placement?: PlacementFigures } | { ok: false; code: string };

export function waitForReady(client: grpc.Client, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => client.waitForReady(Date.now() + timeoutMs, (error) => (error ? reject(error) : resolve())));
}

/** A task without its deadline, which is set when it is sent. */
export type UndatedTask = Omit<Task, 'deadlineUnixMs'>;

export function benchTask(id: string, key: string, integration: string, payload: Buffer, priority: UndatedTask['priority'] = 'USER_PRESENT'): UndatedTask {
  return { id, key, integration, priority, payload, idempotent: false };
}

/** The benchmarks' view of an answer: a handler's error is a failure like a refusal. */
function submitOutcome(answer: SubmitAnswer): SubmitOutcome {
  if (!answer.ok) return { ok: false, code: answer.code };
  if (answer.response.error) return { ok: false, code: answer.response.error.code || 'TASK_ERROR' };
  return { ok: true, cluster: answer.placement?.cluster ?? '', ...(answer.placement ? { placement: answer.placement } : {}) };
}

/** One Balancer.Submit of a task due to end `timeoutMs` from now; never rejects while `client` is open. */
export async function submitBenchTask(client: BalancerClient, task: UndatedTask, timeoutMs: number): Promise<SubmitOutcome> {
  return submitOutcome(await submitTask(client, { ...task, deadlineUnixMs: Date.now() + timeoutMs }));
}

let runCounter = 0;

/** The integration of call `sequence`: the template's one, or its mix's fixed cycle. */
export function integrationPicker(task: TaskTemplate): (sequence: number) => string {
  const mix = task.integrationMix;
  if (!mix || mix.length === 0) return () => task.integration;
  const cycle = mix.flatMap(({ name, weight }) => Array.from({ length: weight }, () => name));
  return (sequence) => cycle[sequence % cycle.length]!;
}

/** The priority of call `sequence`: the template's one, or its mix's fixed cycle. */
export function priorityPicker(task: TaskTemplate): (sequence: number) => Priority {
  const mix = task.priorityMix;
  if (!mix || mix.length === 0) return () => task.priority ?? 'USER_PRESENT';
  const cycle = mix.flatMap(({ priority, weight }) => Array.from({ length: weight }, () => priority));
  return (sequence) => cycle[sequence % cycle.length]!;
}

/**
 * How the generator calls each target (protocol.ts names them); undefined when `targets` gives it
 * nothing to call. A new path (another proxy, a client library) is one more name in protocol.ts
 * and its entry here.
 */
const targetFactories = {
  balancer: balancerTarget,
  // Straight to the workers, as the balancer would call them but without a ledger lease:
  // the worker accepts any non-empty lease id, and releasing an unknown lease is a no-op.
  direct: (targets, settings) => workerTarget(targets, settings),
  // The same calls through HAProxy naming no worker: HAProxy picks one (leastconn), the workers accept unaddressed tasks.
  haproxy: (targets, settings) => (targets.haproxy ? workerTarget(targets, settings, targets.haproxy) : undefined),
  proxyless: (targets, settings) => (targets.ledger ? proxylessTarget(targets.ledger, settings) : undefined),
} satisfies Record<TargetName, (targets: Targets, settings: CallSettings) => CallTarget | undefined>;

/** The target `name` of `targets`; undefined when it has nothing to call. */
export function createTarget(name: TargetName, targets: Targets): CallTarget | undefined {
  return targetFactories[name](targets, {
    integrationOf: integrationPicker(targets.task),
    priorityOf: priorityPicker(targets.task),
    payload: Buffer.from(targets.task.payload),
    runId: `${process.pid}-${++runCounter}`,
    callTimeoutMs: targets.callTimeoutMs,
  });
}

function balancerTarget(targets: Targets, { integrationOf, priorityOf, payload, runId, callTimeoutMs }: CallSettings): CallTarget | undefined {
  const clients = targets.balancerAddresses.map(connectBalancer);
  if (clients.length === 0) return undefined;
  return {
    call: async (sequence, route, marks) => {
      const integration = integrationOf(sequence);
      const priority = marks?.priority ?? priorityOf(sequence);
      const slowdown = marks?.slowdown;
      const body = slowdown?.integration === integration ? Buffer.from(JSON.stringify({ sleepFactor: slowdown.sleepFactor })) : payload;
      const outcome = await submitBenchTask(
        clients[route % clients.length]!,
        benchTask(`${runId}-${sequence}`, `key-${sequence % 1024}`, integration, body, priority),
        callTimeoutMs,
      );
      if (!outcome.ok) return { ...outcome, integration, priority };
      return { ok: true, integration, priority, ...(outcome.placement ? { placement: outcome.placement } : {}) };
    },
    waitForReady: async (timeoutMs) => {
      await Promise.all(clients.map((client) => waitForReady(client, timeoutMs)));
    },
    close: () => {
      for (const client of clients) client.close();
    },
  };
}

/**
 * Worker.Execute on the workers, the route picking the worker; through `proxy` when given: one
 * connection to it, and each call names no worker (empty workerId), the proxy picking one.
 */
function workerTarget(
  targets: Targets,
  { integrationOf, priorityOf, payload, runId, callTimeoutMs }: CallSettings,
  proxy?: { address: string },
): CallTarget | undefined {
  if (targets.workers.length === 0) return undefined;
  const proxyClient = proxy ? (new WorkerService(proxy.address, grpc.credentials.createInsecure()) as WorkerClient) : undefined;
  const workers = proxyClient
    ? // The workers' cluster (one cluster behind the proxy), no worker named.
      [{ cluster: targets.workers[0]!.cluster, workerId: '', client: proxyClient }]
    : targets.workers.map((worker) => ({
        cluster: worker.cluster,
        workerId: worker.workerId,
        client: new WorkerService(worker.address, grpc.credentials.createInsecure()) as WorkerClient,
      }));
  const clients = workers.map((worker) => worker.client);
  return {
    call: (sequence, route) =>
      new Promise((resolve) => {
        const worker = workers[route % workers.length]!;
        const deadlineUnixMs = Date.now() + callTimeoutMs;
        const integration = integrationOf(sequence);
        const priority = priorityOf(sequence);
        const task = { ...benchTask(`${runId}-${sequence}`, `key-${sequence % 1024}`, integration, payload, priority), deadlineUnixMs };
        const request = { task, leaseId: `bench-${runId}-${sequence}`, cluster: worker.cluster, workerId: worker.workerId };
        worker.client.execute(request, { deadline: deadlineUnixMs }, (error, response) => {
          if (error) return resolve({ ok: false, code: errorCodeOf(error).code, integration, priority });
          if (response?.error) return resolve({ ok: false, code: response.error.code || 'TASK_ERROR', integration, priority });
          resolve({ ok: true, integration, priority });
        });
      }),
    waitForReady: async (timeoutMs) => {
      await Promise.all(clients.map((client) => waitForReady(client, timeoutMs)));
    },
    close: () => {
      for (const client of clients) client.close();
    },
  };
}

import * as grpc from '@grpc/grpc-js';
import { BalancerService, WorkerService, metadataKeys, type BalancerClient, type Task, type WorkerClient } from '@headroom/proto';
import type { TargetName, Targets } from './protocol';

export type CallOutcome = { ok: true } | { ok: false; code: string };

/** One call; `route` spreads direct calls over the workers (the same route always reaches the same worker). */
export type Call = (sequence: number, route: number) => Promise<CallOutcome>;

export interface CallTarget {
  call: Call;
  waitForReady(timeoutMs: number): Promise<void>;
  close(): void;
}

function errorCode(error: grpc.ServiceError): string {
  const code = error.metadata?.get(metadataKeys.errorCode)[0];
  return code === undefined ? `GRPC_${grpc.status[error.code] ?? error.code}` : String(code);
}

function waitForReady(client: grpc.Client, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => client.waitForReady(Date.now() + timeoutMs, (error) => (error ? reject(error) : resolve())));
}

/** Tasks for the `echo` integration: the handler returns the payload and does no work. */
function echoTask(runId: string, sequence: number, payload: Buffer, deadlineUnixMs: number): Task {
  return { id: `${runId}-${sequence}`, key: `key-${sequence % 1024}`, integration: 'echo', priority: 'USER_PRESENT', payload, deadlineUnixMs, idempotent: false };
}

let runCounter = 0;

export function createTarget(name: TargetName, targets: Targets): CallTarget {
  const payload = Buffer.alloc(targets.payloadBytes, 0x61);
  const runId = `${process.pid}-${++runCounter}`;
  const { callTimeoutMs } = targets;

  if (name === 'balancer') {
    const client: BalancerClient = new BalancerService(targets.balancerAddress, grpc.credentials.createInsecure());
    return {
      call: (sequence) =>
        new Promise((resolve) => {
          const deadlineUnixMs = Date.now() + callTimeoutMs;
          client.submit({ task: echoTask(runId, sequence, payload, deadlineUnixMs) }, { deadline: deadlineUnixMs }, (error, response) => {
            if (error) return resolve({ ok: false, code: errorCode(error) });
            if (response?.error) return resolve({ ok: false, code: response.error.code || 'TASK_ERROR' });
            resolve({ ok: true });
          });
        }),
      waitForReady: (timeoutMs) => waitForReady(client, timeoutMs),
      close: () => client.close(),
    };
  }

  // Straight to the workers, as the balancer would call them but without a ledger lease:
  // the worker accepts any non-empty lease id, and releasing an unknown lease is a no-op.
  const workers = targets.workers.map((worker) => ({ cluster: worker.cluster, workerId: worker.workerId, client: new WorkerService(worker.address, grpc.credentials.createInsecure()) as WorkerClient }));
  if (workers.length === 0) throw new Error('load generator: no workers to call directly');
  return {
    call: (sequence, route) =>
      new Promise((resolve) => {
        const worker = workers[route % workers.length]!;
        const deadlineUnixMs = Date.now() + callTimeoutMs;
        const request = { task: echoTask(runId, sequence, payload, deadlineUnixMs), leaseId: `bench-${runId}-${sequence}`, cluster: worker.cluster, workerId: worker.workerId };
        worker.client.execute(request, { deadline: deadlineUnixMs }, (error, response) => {
          if (error) return resolve({ ok: false, code: errorCode(error) });
          if (response?.error) return resolve({ ok: false, code: response.error.code || 'TASK_ERROR' });
          resolve({ ok: true });
        });
      }),
    waitForReady: async (timeoutMs) => {
      await Promise.all(workers.map((worker) => waitForReady(worker.client, timeoutMs)));
    },
    close: () => {
      for (const worker of workers) worker.client.close();
    },
  };
}

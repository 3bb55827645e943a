import { channelSecurity, http2ClientTls, type ClientTls, type ExecuteRequest } from '@headroom/proto';
import type { WorkerCalls } from '../src/dispatch';
import { WorkerCallsH2 } from '../src/worker-calls-h2';
import { WorkerChannels } from '../src/worker-channels';

/** What the balancer uses of a WorkerCalls implementation, cache management included. */
export interface WorkerCallsUnderTest extends WorkerCalls {
  readonly size: number;
  keepOnly(live: ReadonlySet<string>): void;
  closeAll(): void;
}

export interface WorkerCallsTestOptions {
  maxSendMessageBytes?: number;
  maxChannels?: number;
  keepaliveTimeMs?: number;
  connectTimeoutMs?: number;
  firstByteTimeoutMs?: number;
  tls?: ClientTls;
}

/** Both implementations of WorkerCalls, built from the same settings: each behaviour test runs against both. */
export const implementations: readonly {
  name: string;
  /**
   * How often `onStartedOrEnded` runs for a task that started: WorkerChannels runs it when the
   * worker says started and again when the call ends (harmless: dispatch's callback is idempotent).
   */
  startedOrEndedRunsForAStartedTask: number;
  create(options?: WorkerCallsTestOptions): WorkerCallsUnderTest;
}[] = [
  {
    name: 'WorkerChannels (grpc-js)',
    startedOrEndedRunsForAStartedTask: 2,
    create: (options = {}) =>
      new WorkerChannels({
        maxSendMessageBytes: options.maxSendMessageBytes ?? 1 << 20,
        maxChannels: options.maxChannels ?? 4,
        security: channelSecurity(options.tls, 'workerTls'),
        keepaliveTimeMs: options.keepaliveTimeMs ?? 100,
        connectTimeoutMs: options.connectTimeoutMs ?? 2000,
        firstByteTimeoutMs: options.firstByteTimeoutMs ?? 2000,
        probeTls: http2ClientTls(options.tls, 'workerTls'),
      }),
  },
  {
    name: 'WorkerCallsH2 (node:http2)',
    startedOrEndedRunsForAStartedTask: 1,
    create: (options = {}) =>
      new WorkerCallsH2({
        maxSendMessageBytes: options.maxSendMessageBytes ?? 1 << 20,
        maxChannels: options.maxChannels ?? 4,
        tls: http2ClientTls(options.tls, 'workerTls'),
        keepaliveTimeMs: options.keepaliveTimeMs ?? 100,
        connectTimeoutMs: options.connectTimeoutMs ?? 2000,
        firstByteTimeoutMs: options.firstByteTimeoutMs ?? 2000,
      }),
  },
];

let sequence = 0;

/** An Execute request for `worker`, as dispatch builds one. */
export function executeRequest(worker: { workerId: string; cluster: string }, integration: string, payload: Buffer, deadlineUnixMs: number): ExecuteRequest {
  sequence++;
  return {
    task: { id: `t${sequence}`, key: 'k', integration, priority: 'BACKGROUND', payload, deadlineUnixMs },
    leaseId: `l${sequence}`,
    cluster: worker.cluster,
    workerId: worker.workerId,
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

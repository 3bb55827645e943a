import * as grpc from '@grpc/grpc-js';
import { WorkerService, metadataKeys, type ChannelSecurity, type ExecuteRequest, type ExecuteResponse__Output, type WorkerClient } from '@headroom/proto';

export type DispatchOutcome =
  /** The worker answered (the handler's result or its coded error). */
  | { kind: 'done'; response: ExecuteResponse__Output }
  /** The task did not start: the worker refused it or could not be reached. It may go elsewhere. */
  | { kind: 'not-started'; unreachable: boolean; code: string; message: string }
  /** The task started, then the worker vanished without an answer. */
  | { kind: 'lost'; message: string }
  | { kind: 'deadline'; started: boolean }
  /** The client gave up: the call to the worker was cancelled. */
  | { kind: 'cancelled'; started: boolean };

export interface WorkerChannelsOptions {
  maxSendMessageBytes: number;
  /** Plain text or TLS (see channelSecurity). */
  security: ChannelSecurity;
  /** Most worker channels kept open; beyond it the least recently used one is closed. */
  maxChannels: number;
}

/** One cached gRPC channel per worker address; channels of workers that left are closed. */
export class WorkerChannels {
  // Insertion order is use order (re-inserted on use), so the first entry is the least recently used.
  private readonly clients = new Map<string, WorkerClient>();

  constructor(private readonly options: WorkerChannelsOptions) {}

  get size(): number {
    return this.clients.size;
  }

  private client(address: string): WorkerClient {
    let client = this.clients.get(address);
    if (client) {
      this.clients.delete(address);
    } else {
      client = new WorkerService(address, this.options.security.credentials, {
        ...this.options.security.options,
        'grpc.max_send_message_length': this.options.maxSendMessageBytes,
        'grpc.max_receive_message_length': this.options.maxSendMessageBytes,
        // Channelz keeps per-call statistics nobody reads here. (Not turned off on servers:
        // in grpc-js 1.14 a server without channelz does not track its sessions, so
        // forceShutdown() would leave open calls running.)
        'grpc.enable_channelz': 0,
        'grpc.keepalive_time_ms': 10_000,
        'grpc.keepalive_timeout_ms': 5_000,
        // Retry to connect quickly after a worker restarts on the same address.
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 1_000,
      });
      if (this.clients.size >= this.options.maxChannels) {
        const [oldest, oldClient] = this.clients.entries().next().value as [string, WorkerClient];
        this.clients.delete(oldest);
        oldClient.close();
      }
    }
    this.clients.set(address, client);
    return client;
  }

  /** Closes the channels of addresses not in `live`. */
  keepOnly(live: ReadonlySet<string>): void {
    for (const [address, client] of this.clients) {
      if (!live.has(address)) {
        this.clients.delete(address);
        client.close();
      }
    }
  }

  closeAll(): void {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }

  /** `onStartedOrEnded` runs once: when the worker says the task started, or when the call ends. */
  execute(address: string, request: ExecuteRequest, deadlineUnixMs: number, signal: AbortSignal, onStartedOrEnded?: () => void): Promise<DispatchOutcome> {
    return new Promise((resolve) => {
      let started = false;
      const call = this.client(address).execute(request, { deadline: deadlineUnixMs }, (error, response) => {
        onStartedOrEnded?.();
        signal.removeEventListener('abort', onAbort);
        if (!error) return resolve({ kind: 'done', response: response! });
        if (signal.aborted) return resolve({ kind: 'cancelled', started });
        if (error.code === grpc.status.DEADLINE_EXCEEDED) return resolve({ kind: 'deadline', started });
        if (started) return resolve({ kind: 'lost', message: error.details });
        const code = String(error.metadata?.get(metadataKeys.errorCode)[0] ?? '');
        // A worker's refusal carries a code; a call that never reached one is UNAVAILABLE without.
        resolve({ kind: 'not-started', unreachable: code === '' && error.code === grpc.status.UNAVAILABLE, code, message: error.details });
      });
      call.on('metadata', (metadata: grpc.Metadata) => {
        if (metadata.get(metadataKeys.started)[0] === '1') {
          started = true;
          onStartedOrEnded?.();
        }
      });
      const onAbort = () => call.cancel();
      if (signal.aborted) call.cancel();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

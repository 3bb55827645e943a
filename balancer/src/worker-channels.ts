import * as grpc from '@grpc/grpc-js';
import {
  WorkerService,
  metadataKeys,
  type ChannelSecurity,
  type ExecuteRequest,
  type ExecuteResponse__Output,
  type Http2ClientTls,
  type WorkerClient,
} from '@headroom/proto';
import { ownFaultOfError, ownFaultOfStatus, probeConnection, type OwnFaultReason } from './connect-failures';

export type DispatchOutcome =
  /** The worker answered (the handler's result or its coded error). */
  | { kind: 'done'; response: ExecuteResponse__Output }
  /**
   * The task did not start: the worker refused it or could not be reached. It may go elsewhere.
   * `unreachable`: the worker looks down (refused, reset, timed out). `ownFault`: this balancer's
   * own TLS or credentials failed (never `unreachable`: it must not eject the worker).
   */
  | { kind: 'not-started'; unreachable: boolean; code: string; message: string; ownFault?: OwnFaultReason }
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
  /** How often an open connection to a worker is pinged (ms): 10 s unless a test shortens it. */
  keepaliveTimeMs?: number;
  /** Longest a call waits for a connection to a worker (TCP and TLS) before it counts the worker unreachable. */
  connectTimeoutMs: number;
  /** Longest a call then waits for the worker's first bytes (its HTTP/2 SETTINGS). */
  firstByteTimeoutMs: number;
  /** The same TLS as `security`, as node:http2 takes it: the probe that tells why a connection failed (connect-failures.ts). */
  probeTls: Http2ClientTls | undefined;
}

interface Channel {
  client: WorkerClient;
  /** Calls on it that have not ended. */
  calls: number;
  /** Set when it left the cache: it closes when its last call ends. */
  closing: boolean;
}

/**
 * One cached gRPC channel per worker address; channels of workers that left are closed once the
 * calls they carry have ended. (Closed at once, grpc-js ends the connection at its next
 * keepalive ping and with it every task still running there: a worker that missed a few
 * heartbeats would lose its long tasks.)
 */
export class WorkerChannels {
  // Insertion order is use order (re-inserted on use), so the first entry is the least recently used.
  private readonly channels = new Map<string, Channel>();
  // Channels that left the cache with calls under way, by address (a worker that comes back
  // before they end takes its channel back). At most one per address, so bounded as the calls are.
  private readonly closing = new Map<string, Channel>();
  // Probes under way (connectFailure), by address: bounded as the channels are.
  private readonly probes = new Map<string, Promise<Error | undefined>>();

  constructor(private readonly options: WorkerChannelsOptions) {}

  /** Channels open: cached, and closing behind calls under way. */
  get size(): number {
    return this.channels.size + this.closing.size;
  }

  private channel(address: string): Channel {
    let channel = this.channels.get(address) ?? this.closing.get(address);
    if (channel) {
      this.channels.delete(address);
      this.closing.delete(address);
      channel.closing = false;
    } else {
      const client = new WorkerService(address, this.options.security.credentials, {
        ...this.options.security.options,
        'grpc.max_send_message_length': this.options.maxSendMessageBytes,
        'grpc.max_receive_message_length': this.options.maxSendMessageBytes,
        // Channelz keeps per-call statistics nobody reads here. (Not turned off on servers:
        // in grpc-js 1.14 a server without channelz does not track its sessions, so
        // forceShutdown() would leave open calls running.)
        'grpc.enable_channelz': 0,
        'grpc.keepalive_time_ms': this.options.keepaliveTimeMs ?? 10_000,
        'grpc.keepalive_timeout_ms': 5_000,
        // Retry to connect quickly after a worker restarts on the same address.
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 1_000,
      });
      channel = { client, calls: 0, closing: false };
      if (this.channels.size >= this.options.maxChannels) {
        const [oldest, oldChannel] = this.channels.entries().next().value as [string, Channel];
        this.retire(oldest, oldChannel);
      }
    }
    this.channels.set(address, channel);
    return channel;
  }

  private retire(address: string, channel: Channel): void {
    this.channels.delete(address);
    if (channel.calls === 0) {
      channel.client.close();
      return;
    }
    channel.closing = true;
    this.closing.set(address, channel);
  }

  private callEnded(address: string, channel: Channel): void {
    channel.calls--;
    if (channel.closing && channel.calls === 0) {
      channel.client.close();
      if (this.closing.get(address) === channel) this.closing.delete(address);
    }
  }

  /** Closes the channels of addresses not in `live` (each once its calls have ended). */
  keepOnly(live: ReadonlySet<string>): void {
    for (const [address, channel] of this.channels) {
      if (!live.has(address)) this.retire(address, channel);
    }
  }

  closeAll(): void {
    for (const channel of this.channels.values()) channel.client.close();
    for (const channel of this.closing.values()) channel.client.close();
    this.channels.clear();
    this.closing.clear();
  }

  /** `onStartedOrEnded` runs once: when the worker says the task started, or when the call ends. */
  execute(address: string, request: ExecuteRequest, deadlineUnixMs: number, signal: AbortSignal, onStartedOrEnded?: () => void): Promise<DispatchOutcome> {
    return new Promise((resolve) => {
      let started = false;
      let connectTimedOut = false;
      let connectTimer: NodeJS.Timeout | undefined;
      const channel = this.channel(address);
      channel.calls++;
      const call = channel.client.execute(request, { deadline: deadlineUnixMs }, (error, response) => {
        clearTimeout(connectTimer);
        this.callEnded(address, channel);
        onStartedOrEnded?.();
        signal.removeEventListener('abort', onAbort);
        if (!error) return resolve({ kind: 'done', response: response! });
        if (connectTimedOut) return resolve({ kind: 'not-started', unreachable: true, code: '', message: this.connectTimeoutMessage() });
        if (signal.aborted) return resolve({ kind: 'cancelled', started });
        if (error.code === grpc.status.DEADLINE_EXCEEDED) return resolve({ kind: 'deadline', started });
        if (started) return resolve({ kind: 'lost', message: error.details });
        const code = String(error.metadata?.get(metadataKeys.errorCode)[0] ?? '');
        // A worker's refusal carries a code; a call that never reached one is UNAVAILABLE without.
        if (code === '' && error.code === grpc.status.UNAVAILABLE) return void this.connectFailure(address, error.details).then(resolve);
        const ownFault = ownFaultOfStatus(error.code, code);
        resolve({ kind: 'not-started', unreachable: false, code, message: error.details, ...(ownFault ? { ownFault } : {}) });
      });
      // A worker that accepts and never answers keeps grpc-js connecting for 20 s and more: a call
      // not connected within the bounds counts the worker unreachable, as a refused connection does.
      connectTimer = this.whenNotConnected(channel, () => {
        connectTimedOut = true;
        call.cancel();
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

  /** Runs `timedOut` if the channel is not READY (connected, the worker's SETTINGS read) within connect and first-byte time. */
  private whenNotConnected(channel: Channel, timedOut: () => void): NodeJS.Timeout | undefined {
    const grpcChannel = channel.client.getChannel();
    if (grpcChannel.getConnectivityState(false) === grpc.connectivityState.READY) return undefined;
    const timer = setTimeout(() => {
      if (grpcChannel.getConnectivityState(false) !== grpc.connectivityState.READY) timedOut();
    }, this.options.connectTimeoutMs + this.options.firstByteTimeoutMs);
    timer.unref();
    return timer;
  }

  private connectTimeoutMessage(): string {
    return `no connection to the worker within ${this.options.connectTimeoutMs} ms (workerConnectTimeoutMs) and its first bytes within ${this.options.firstByteTimeoutMs} ms more (workerFirstByteTimeoutMs)`;
  }

  /** A call that reached no worker: the worker's side (unreachable), or this balancer's own TLS (the probe's error code says). */
  private async connectFailure(address: string, details: string): Promise<DispatchOutcome> {
    let probe = this.probes.get(address);
    if (!probe) {
      // One probe per address at a time, however many calls failed together.
      probe = probeConnection(address, this.options.probeTls, this.options.connectTimeoutMs + this.options.firstByteTimeoutMs).finally(() =>
        this.probes.delete(address),
      );
      this.probes.set(address, probe);
    }
    const probeError = await probe;
    const ownFault = ownFaultOfError(probeError);
    if (ownFault)
      return { kind: 'not-started', unreachable: false, code: '', message: `${probeError!.message} (${(probeError as NodeJS.ErrnoException).code})`, ownFault };
    return { kind: 'not-started', unreachable: true, code: '', message: details };
  }
}

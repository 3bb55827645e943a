import * as http2 from 'node:http2';
import { WorkerService, type ExecuteRequest, type Http2ClientTls } from '@headroom/proto';
import type { WorkerCalls } from './dispatch';
import { H2ExecuteCall, executeHeaders, type CallConnection } from './h2-execute-call';
import type { DispatchOutcome } from './worker-channels';

const serializeRequest = WorkerService.service.Execute.requestSerialize;
/** How long a keepalive ping may go unanswered before its connection is taken for dead. */
const keepaliveTimeoutMs = 5_000;

export interface WorkerCallsH2Options {
  /** Largest request sent, and largest response accepted (bytes of the message). */
  maxSendMessageBytes: number;
  /** TLS to the workers (http2ClientTls from @headroom/proto); plain text when undefined. */
  tls: Http2ClientTls | undefined;
  /** Most worker connections kept open; beyond it the least recently used one is closed. */
  maxChannels: number;
  /** How often a connection with calls under way is pinged (ms): 10 s unless a test shortens it. */
  keepaliveTimeMs?: number;
  /** Longest a new connection may take to connect (TCP and TLS) before its calls count the worker unreachable. */
  connectTimeoutMs: number;
  /** Longest a connected worker may then take to send its first bytes (its HTTP/2 SETTINGS). */
  firstByteTimeoutMs: number;
}

/** Timings of one connection: see WorkerCallsH2Options. */
interface ConnectionTimings {
  keepaliveTimeMs: number;
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
}

/** One HTTP/2 session to a worker, shared by every call to its address. */
class WorkerConnection implements CallConnection {
  /** Calls on it that have not ended. */
  calls = 0;
  /** Set when it left the cache: it closes when its last call ends. */
  closing = false;
  failure: string | undefined;
  /** The error it failed with, when one came: its code tells this balancer's TLS faults apart. */
  failureError: Error | undefined;
  private keepaliveTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private connectTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly address: string,
    readonly session: http2.ClientHttp2Session,
    private readonly timings: ConnectionTimings,
    private readonly ended: (connection: WorkerConnection) => void,
    private readonly failed: (connection: WorkerConnection) => void,
  ) {
    // Held open only while calls run (see callStarted): an idle connection keeps no process alive.
    session.unref();
    this.boundConnect();
    session.on('error', (error: Error) => {
      this.failureError ??= error;
      this.fail(error.message);
    });
    // A TLS alert after the handshake (a client certificate the worker wants) reaches only the socket.
    session.once('connect', (_session, socket) => socket.once('error', (error: Error) => (this.failureError ??= error)));
    session.on('goaway', (code: number) => this.fail(`the worker sent GOAWAY (code ${code})`));
    session.on('close', () => this.fail('the connection closed'));
  }

  /**
   * A worker that accepts and never answers (or an address that drops packets) would hold each
   * call until its deadline: the connection must connect, then bring the worker's SETTINGS, in
   * bounded time, or it fails and its calls count the worker unreachable.
   */
  private boundConnect(): void {
    const { connectTimeoutMs, firstByteTimeoutMs } = this.timings;
    this.connectTimer = setTimeout(() => this.destroy(`no connection to the worker in ${connectTimeoutMs} ms (workerConnectTimeoutMs)`), connectTimeoutMs);
    this.connectTimer.unref();
    this.session.once('connect', () => {
      clearTimeout(this.connectTimer);
      this.connectTimer = setTimeout(
        () => this.destroy(`connected, but the worker sent nothing in ${firstByteTimeoutMs} ms (workerFirstByteTimeoutMs)`),
        firstByteTimeoutMs,
      );
      this.connectTimer.unref();
    });
    this.session.once('remoteSettings', () => clearTimeout(this.connectTimer));
  }

  /** False once the session failed, closed or went away (its events may come after its streams'). */
  get usable(): boolean {
    return this.failure === undefined && !this.session.closed && !this.session.destroyed;
  }

  /** Records why it failed and leaves the cache, before its streams end: a call retried at once connects anew. */
  fail(why: string): void {
    if (this.failure !== undefined) return;
    this.failure = why;
    this.stopKeepalive();
    this.failed(this);
  }

  callStarted(): void {
    if (this.calls++ > 0) return;
    this.session.ref();
    this.keepaliveTimer = setInterval(() => this.ping(), this.timings.keepaliveTimeMs);
    this.keepaliveTimer.unref();
  }

  callEnded(): void {
    if (--this.calls > 0) return;
    if (!this.session.destroyed) this.session.unref();
    this.stopKeepalive();
    this.ended(this);
  }

  close(): void {
    this.stopKeepalive();
    this.session.close();
  }

  private ping(): void {
    // node:http2 cancels a ping sent while the session still connects, which would destroy a
    // healthy connection on a slow machine; the connect and first-byte bounds cover that phase.
    if (this.pingTimer || this.session.destroyed || this.session.connecting) return;
    this.pingTimer = setTimeout(() => this.destroy(`no answer to a keepalive ping in ${keepaliveTimeoutMs} ms`), keepaliveTimeoutMs);
    this.pingTimer.unref();
    try {
      this.session.ping((error) => {
        clearTimeout(this.pingTimer);
        this.pingTimer = undefined;
        if (error) this.destroy(`keepalive ping failed: ${error.message}`);
      });
    } catch (error) {
      this.destroy(`keepalive ping failed: ${(error as Error).message}`);
    }
  }

  private destroy(why: string): void {
    this.fail(why);
    if (!this.session.destroyed) this.session.destroy();
  }

  private stopKeepalive(): void {
    clearTimeout(this.connectTimer);
    clearInterval(this.keepaliveTimer);
    clearTimeout(this.pingTimer);
    this.keepaliveTimer = undefined;
    this.pingTimer = undefined;
  }
}

/**
 * WorkerCalls over node:http2 with gRPC framing by hand: the same contract and outcomes as
 * WorkerChannels (grpc-js), at a fraction of the CPU per call. One session per worker address,
 * reused; the least recently used beyond maxChannels is closed once its calls have ended, as are
 * those of workers that left (keepOnly). A session that fails leaves the cache at once, so the
 * next call to that address connects again (a worker restarted there is reachable at once).
 */
export class WorkerCallsH2 implements WorkerCalls {
  // Insertion order is use order (re-inserted on use), so the first entry is the least recently used.
  private readonly connections = new Map<string, WorkerConnection>();
  // Connections that left the cache with calls under way, by address (a worker that comes back
  // before they end takes its connection back). At most one per address, so bounded as the calls are.
  private readonly closing = new Map<string, WorkerConnection>();
  private readonly scheme: string;
  private readonly sessionOptions: http2.SecureClientSessionOptions;
  private readonly onCallEnded = (connection: WorkerConnection) => this.callEnded(connection);
  private readonly onFailed = (connection: WorkerConnection) => this.forget(connection);

  constructor(private readonly options: WorkerCallsH2Options) {
    this.scheme = options.tls ? 'https://' : 'http://';
    this.sessionOptions = {
      ...(options.tls ?? {}),
      // Node's default (10 MB per session) answers ENHANCE_YOUR_CALM to streams past it: many
      // calls with large payloads on one worker would fail. Flow control bounds the memory.
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      settings: { enablePush: false },
    };
  }

  /** Connections open: cached, and closing behind calls under way. */
  get size(): number {
    return this.connections.size + this.closing.size;
  }

  /** Closes the connections of addresses not in `live` (each once its calls have ended). */
  keepOnly(live: ReadonlySet<string>): void {
    for (const [address, connection] of this.connections) {
      if (!live.has(address)) this.retire(connection);
    }
  }

  /** Closes every connection: calls under way finish, none starts. */
  closeAll(): void {
    for (const connection of this.connections.values()) connection.close();
    for (const connection of this.closing.values()) connection.close();
    this.connections.clear();
    this.closing.clear();
  }

  /** `onStartedOrEnded` runs once: when the worker says the task started, or when the call ends. */
  execute(address: string, request: ExecuteRequest, deadlineUnixMs: number, signal: AbortSignal, onStartedOrEnded?: () => void): Promise<DispatchOutcome> {
    return new Promise((resolve) => {
      const msLeft = deadlineUnixMs - Date.now();
      if (signal.aborted || msLeft <= 0) {
        onStartedOrEnded?.();
        return resolve(signal.aborted ? { kind: 'cancelled', started: false } : { kind: 'deadline', started: false });
      }
      let body: Buffer;
      try {
        body = serializeRequest(request);
      } catch (error) {
        onStartedOrEnded?.();
        return resolve({ kind: 'not-started', unreachable: false, code: '', message: `Request message serialization failure: ${(error as Error).message}` });
      }
      if (body.length > this.options.maxSendMessageBytes) {
        onStartedOrEnded?.();
        return resolve({
          kind: 'not-started',
          unreachable: false,
          code: '',
          message: `Attempted to send message with a size larger than ${this.options.maxSendMessageBytes}`,
        });
      }
      let connection: WorkerConnection | undefined;
      let stream: http2.ClientHttp2Stream;
      try {
        connection = this.connection(address);
        stream = connection.session.request(executeHeaders(msLeft), { endStream: false });
      } catch (error) {
        // An address http2.connect cannot parse, or a session that failed since it was checked
        // (of no more use): as grpc-js, UNAVAILABLE.
        connection?.fail((error as Error).message);
        onStartedOrEnded?.();
        return resolve({ kind: 'not-started', unreachable: true, code: '', message: `the connection to the worker failed: ${(error as Error).message}` });
      }
      connection.callStarted();
      new H2ExecuteCall(connection, stream, { body, msLeft, maxReceiveMessageBytes: this.options.maxSendMessageBytes, signal, onStartedOrEnded, resolve });
    });
  }

  private connection(address: string): WorkerConnection {
    let connection = this.connections.get(address) ?? this.closing.get(address);
    if (connection && !connection.usable) {
      connection.fail('the connection closed');
      connection = undefined;
    }
    if (connection) {
      this.connections.delete(address);
      this.closing.delete(address);
      connection.closing = false;
    } else {
      const session = http2.connect(this.scheme + address, this.sessionOptions);
      const { keepaliveTimeMs = 10_000, connectTimeoutMs, firstByteTimeoutMs } = this.options;
      connection = new WorkerConnection(address, session, { keepaliveTimeMs, connectTimeoutMs, firstByteTimeoutMs }, this.onCallEnded, this.onFailed);
      if (this.connections.size >= this.options.maxChannels) {
        const oldest = this.connections.values().next().value as WorkerConnection;
        this.retire(oldest);
      }
    }
    this.connections.set(address, connection);
    return connection;
  }

  private retire(connection: WorkerConnection): void {
    this.connections.delete(connection.address);
    if (connection.calls === 0) {
      connection.close();
      return;
    }
    connection.closing = true;
    this.closing.set(connection.address, connection);
  }

  private callEnded(connection: WorkerConnection): void {
    if (connection.closing && connection.calls === 0) {
      connection.close();
      if (this.closing.get(connection.address) === connection) this.closing.delete(connection.address);
    }
  }

  /** A failed connection leaves the cache (its calls end on their own); the next call connects anew. */
  private forget(connection: WorkerConnection): void {
    const { address } = connection;
    if (this.connections.get(address) === connection) this.connections.delete(address);
    if (this.closing.get(address) === connection) this.closing.delete(address);
    // Closed now if idle, else by callEnded after its last call.
    connection.closing = true;
    if (connection.calls === 0) connection.close();
  }
}

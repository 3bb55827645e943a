import type * as http2 from 'node:http2';
import { status } from '@grpc/grpc-js';
import { GrpcMessageReader, type GrpcReadFailure } from './grpc-message-reader';

/** A gRPC status a call ends with; `metadata` goes out with it as trailers (headroom-error-code, retry-after-ms). */
export interface CallStatus {
  code: status;
  details: string;
  metadata?: http2.OutgoingHttpHeaders;
}

/** One method H2GrpcServer serves: how its request is read, and what runs once it is. */
export interface H2Method {
  readonly path: string;
  /** Largest request message read (grpc.max_receive_message_length); its prefix is checked before anything is buffered. */
  readonly maxRequestBytes: number;
  /** The answer to a request over maxRequestBytes; grpc-js's RESOURCE_EXHAUSTED when not given. */
  tooLarge?(bytes: number): CallStatus;
  /** Decodes the request; what it throws is answered INTERNAL "Error deserializing request", as grpc-js does. */
  decode(bytes: Buffer): unknown;
  /** Runs once the request is read whole (exactly one message, then the client's half-close). */
  run(call: H2ServerCall, request: unknown): void;
}

// As grpc-js reads grpc-timeout (server-interceptors.ts): up to 8 digits and a unit.
const timeoutPattern = /(\d{1,8})\s*([HMSmun])/;
const maxTimerMs = 2 ** 31 - 1;
/** An answer up to this size is framed in a buffer of its own (one write); a larger one goes as prefix and message (writev). */
const maxCopiedMessageBytes = 16 * 1024;
const msPerTimeoutUnit: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000_001 };

// Node copies header objects before it sends them, so these are shared by every call.
const responseHeaders: http2.OutgoingHttpHeaders = Object.freeze({ ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': 'identity' });
const responseOptions: http2.ServerStreamResponseOptions = Object.freeze({ waitForTrailers: true, sendDate: false });
const trailersOnlyOptions: http2.ServerStreamResponseOptions = Object.freeze({ endStream: true, sendDate: false });
const okTrailers: http2.OutgoingHttpHeaders = Object.freeze({ 'grpc-status': '0', 'grpc-message': 'OK' });

function sendOkTrailers(this: http2.ServerHttp2Stream): void {
  this.sendTrailers(okTrailers);
}

/**
 * One gRPC call on a node:http2 server stream, framed by hand: it reads the one request message
 * (GrpcMessageReader, within the method's limit), runs the method, and answers what grpc-js's
 * server would for the same events: a message then trailers, or a trailers-only status; the
 * client's deadline (grpc-timeout) answered DEADLINE_EXCEEDED; a cancelled or reset stream
 * aborts `signal`, as grpc-js's call emits "cancelled".
 */
export class H2ServerCall {
  private request: unknown;
  private messages = 0;
  private headersSent = false;
  /** Its status was sent, or its stream closed: nothing more goes out. */
  private ended = false;
  private abortController: AbortController | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private readonly reader: GrpcMessageReader;
  private readonly onMessage = (message: Buffer) => this.message(message);

  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    private readonly method: H2Method,
  ) {
    this.reader = new GrpcMessageReader(method.maxRequestBytes);
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.on('end', () => this.onEnd());
    stream.on('close', () => this.onClose());
    const timeout = headers['grpc-timeout'];
    if (timeout !== undefined) this.startDeadline(String(timeout));
  }

  /** Aborted when the client cancels, its connection fails or its deadline passes before the answer. */
  get signal(): AbortSignal {
    if (!this.abortController) {
      this.abortController = new AbortController();
      if (this.ended) this.abortController.abort();
    }
    return this.abortController.signal;
  }

  /** Sends one response message (encoded, without its 5-byte prefix), the response headers first. */
  sendMessage(message: Buffer): void {
    if (this.ended || this.stream.closed) return;
    this.sendHeaders();
    this.stream.cork();
    this.stream.write(prefixOf(message));
    this.stream.write(message);
    process.nextTick(uncork, this.stream);
  }

  /** The unary answer: headers, the message, trailers with grpc-status 0, in one write. */
  sendLastMessage(message: Buffer): void {
    if (this.ended) return;
    this.end();
    if (this.stream.closed || this.stream.destroyed) return;
    this.sendHeaders();
    this.stream.once('wantTrailers', sendOkTrailers);
    if (message.length <= maxCopiedMessageBytes) {
      // One small buffer is cheaper to write than two (a writev) for the usual short answer.
      const framed = Buffer.allocUnsafe(5 + message.length);
      framed[0] = 0;
      framed.writeUInt32BE(message.length, 1);
      message.copy(framed, 5);
      this.stream.end(framed);
      return;
    }
    this.stream.cork();
    this.stream.write(prefixOf(message));
    this.stream.end(message);
  }

  /** Ends the call with `callStatus`: as trailers after headers already sent, or trailers-only. */
  sendStatus(callStatus: CallStatus): void {
    if (this.ended) return;
    this.end();
    if (this.stream.closed || this.stream.destroyed) return;
    const trailers: http2.OutgoingHttpHeaders = {
      'grpc-status': String(callStatus.code),
      'grpc-message': grpcMessage(callStatus.details),
      ...callStatus.metadata,
    };
    if (this.headersSent) {
      this.stream.once('wantTrailers', () => this.stream.sendTrailers(trailers));
      this.stream.end();
    } else {
      this.stream.respond({ ...responseHeaders, ...trailers }, trailersOnlyOptions);
    }
  }

  private sendHeaders(): void {
    if (this.headersSent) return;
    this.headersSent = true;
    this.stream.respond(responseHeaders, responseOptions);
  }

  private startDeadline(timeout: string): void {
    const match = timeoutPattern.exec(timeout);
    if (!match) return this.fail({ code: status.INTERNAL, details: `Invalid grpc-timeout value "${timeout}"` });
    // Capped where setTimeout is (about 24.8 days; grpc-js's `| 0` wraps such a timeout to a past one).
    const timeoutMs = Math.min(Math.trunc(Number(match[1]) * msPerTimeoutUnit[match[2]!]!), maxTimerMs);
    this.deadlineTimer = setTimeout(() => this.fail({ code: status.DEADLINE_EXCEEDED, details: 'Deadline exceeded' }), timeoutMs);
    this.deadlineTimer.unref();
  }

  private onData(chunk: Buffer): void {
    // After the status, the rest of the request is read and dropped (flow control goes on).
    if (this.ended) return;
    const failure = this.reader.push(chunk, this.onMessage);
    if (failure) this.fail(this.statusOfReadFailure(failure));
  }

  private message(bytes: Buffer): void {
    if (this.ended) return;
    if (++this.messages > 1)
      return this.fail({ code: status.UNIMPLEMENTED, details: `Received a second request message for server streaming method ${this.method.path}` });
    try {
      this.request = this.method.decode(bytes);
    } catch {
      this.fail({ code: status.INTERNAL, details: 'Error deserializing request' });
    }
  }

  private onEnd(): void {
    if (this.ended) return;
    if (this.messages === 0)
      return this.fail({ code: status.UNIMPLEMENTED, details: `Received no request message for server streaming method ${this.method.path}` });
    try {
      this.method.run(this, this.request);
    } catch {
      this.fail({ code: status.UNKNOWN, details: 'Unknown error' });
    }
  }

  /** Closed: after the status was sent, or before (the client reset the stream, or the connection went). */
  private onClose(): void {
    if (this.ended) return;
    this.end();
    this.abortController?.abort();
  }

  /** Ends the call from this side before its method answered (deadline, unreadable request): the method's work is aborted. */
  private fail(callStatus: CallStatus): void {
    if (this.ended) return;
    this.sendStatus(callStatus);
    this.abortController?.abort();
  }

  private end(): void {
    this.ended = true;
    clearTimeout(this.deadlineTimer);
  }

  private statusOfReadFailure(failure: GrpcReadFailure): CallStatus {
    switch (failure.kind) {
      case 'too-large':
        return (
          this.method.tooLarge?.(failure.bytes) ?? {
            code: status.RESOURCE_EXHAUSTED,
            details: `Received message larger than max (${failure.bytes} vs ${this.method.maxRequestBytes})`,
          }
        );
      case 'compressed':
        // We answer grpc-accept-encoding: identity, so a client has no reason to compress.
        return { code: status.UNIMPLEMENTED, details: 'Received a compressed message; this server reads identity only (grpc-accept-encoding: identity)' };
      case 'bad-flag':
        return { code: status.INTERNAL, details: `Received a message with an invalid flag byte ${failure.flag}` };
    }
  }
}

function prefixOf(message: Buffer): Buffer {
  const prefix = Buffer.allocUnsafe(5);
  prefix[0] = 0;
  prefix.writeUInt32BE(message.length, 1);
  return prefix;
}

function uncork(stream: http2.ServerHttp2Stream): void {
  stream.uncork();
}

/** grpc-message as grpc-js writes it (encodeURI) and its clients read it (decodeURI); never throws. */
function grpcMessage(details: string): string {
  try {
    return encodeURI(details);
  } catch {
    // A lone surrogate: encodeURI throws where grpc-js would fail the call; send it well formed instead.
    return encodeURI(details.replace(/\p{Surrogate}/gu, '\uFFFD'));
  }
}

import * as http2 from 'node:http2';
import { status } from '@grpc/grpc-js';
import { WorkerService, metadataKeys, type ExecuteResponse__Output } from '@headroom/proto';
import { GrpcMessageReader, type GrpcReadFailure } from './grpc-message-reader';
import { ownFaultOfError, ownFaultOfStatus, type OwnFaultReason } from './connect-failures';
import type { DispatchOutcome } from './worker-channels';

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM, NGHTTP2_FLAG_END_STREAM } = http2.constants;
const executeMethod = WorkerService.service.Execute;
const abortListenerOptions = { once: true } as const;

/** The path of Worker.Execute ("/headroom.v1.Worker/Execute"). */
export const executePath = executeMethod.path;

/** What one call needs of the connection it runs on. */
export interface CallConnection {
  readonly session: http2.ClientHttp2Session;
  /** Why the connection failed, once it has. */
  readonly failure: string | undefined;
  /** The error it failed with, when one came. */
  readonly failureError: Error | undefined;
  /** The call is over (from the balancer's side): once for each call started on it. */
  callEnded(): void;
}

export interface ExecuteCallSettings {
  /** The encoded ExecuteRequest, without its 5-byte prefix. */
  body: Buffer;
  msLeft: number;
  maxReceiveMessageBytes: number;
  signal: AbortSignal;
  onStartedOrEnded: (() => void) | undefined;
  resolve: (outcome: DispatchOutcome) => void;
}

/** The request headers of one call (grpc-timeout as the gRPC spec writes it: at most 8 digits and a unit). */
export function executeHeaders(msLeft: number): http2.OutgoingHttpHeaders {
  const ms = Math.max(1, Math.ceil(msLeft));
  return {
    ':method': 'POST',
    ':path': executePath,
    'content-type': 'application/grpc',
    te: 'trailers',
    'grpc-timeout': ms < 100_000_000 ? `${ms}m` : `${Math.min(99_999_999, Math.ceil(ms / 1000))}S`,
  };
}

/**
 * One Worker.Execute call on an HTTP/2 stream, gRPC framing by hand: it writes the request,
 * reads the worker's headers ("headroom-started"), its one response message and its trailers
 * (or a trailers-only answer), and settles with the DispatchOutcome WorkerChannels would give
 * for the same events (the gRPC statuses grpc-js would synthesise are synthesised here too).
 */
export class H2ExecuteCall {
  private started = false;
  private notified = false;
  private ended = false;
  private response: ExecuteResponse__Output | undefined;
  private messages = 0;
  private trailers: http2.IncomingHttpHeaders | undefined;
  private httpStatus = 0;
  private streamError: Error | undefined;
  private readonly reader: GrpcMessageReader;
  private readonly deadlineTimer: NodeJS.Timeout;
  private readonly onAbort = () => this.cancel(status.CANCELLED, 'Cancelled on client');
  private readonly onMessage = (message: Buffer) => this.message(message);

  constructor(
    private readonly connection: CallConnection,
    private readonly stream: http2.ClientHttp2Stream,
    private readonly settings: ExecuteCallSettings,
  ) {
    this.reader = new GrpcMessageReader(settings.maxReceiveMessageBytes);
    stream.on('response', (headers, flags) => this.onResponse(headers, flags));
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.on('trailers', (headers) => (this.trailers = headers));
    stream.on('end', () => this.onEnd());
    stream.on('close', () => this.onClose());
    stream.on('error', (error: Error) => (this.streamError = error));
    this.deadlineTimer = setTimeout(() => this.cancel(status.DEADLINE_EXCEEDED, 'Deadline exceeded'), settings.msLeft);
    this.deadlineTimer.unref();
    settings.signal.addEventListener('abort', this.onAbort, abortListenerOptions);

    const { body } = settings;
    const prefix = Buffer.allocUnsafe(5);
    prefix[0] = 0;
    prefix.writeUInt32BE(body.length, 1);
    // Corked, the two buffers go out in one write (writev), without being joined in a copy.
    stream.cork();
    stream.write(prefix);
    stream.end(body);
  }

  private onResponse(headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader, flags: number): void {
    if (flags & NGHTTP2_FLAG_END_STREAM) {
      // Trailers-only: the status is in the only headers (a refusal, or an error before the handler).
      this.trailers = headers;
      return;
    }
    this.httpStatus = headers[':status'] ?? 0;
    if (headers[metadataKeys.started] === '1' && !this.started) {
      this.started = true;
      this.notify();
    }
  }

  private onData(chunk: Buffer): void {
    if (this.ended) return;
    const failure = this.reader.push(chunk, this.onMessage);
    if (failure) this.cancel(...statusOfReadFailure(failure, this.settings.maxReceiveMessageBytes));
  }

  private message(bytes: Buffer): void {
    if (this.ended) return;
    if (++this.messages > 1) return this.cancel(status.UNIMPLEMENTED, 'Too many responses received');
    try {
      this.response = executeMethod.responseDeserialize(bytes);
    } catch (error) {
      this.cancel(status.INTERNAL, `Response message parsing error: ${(error as Error).message}`);
    }
  }

  /** The readable side ended: every message has been read; the trailers came before this. */
  private onEnd(): void {
    if (this.trailers) this.settleFromTrailers(this.trailers);
  }

  private onClose(): void {
    if (this.ended) return;
    if (this.trailers) return this.settleFromTrailers(this.trailers);
    // No status: the stream was reset, or the connection under it failed.
    const { session, failure, failureError } = this.connection;
    if (failure !== undefined || session.destroyed || isConnectionError(this.streamError)) {
      // The stream's error may be only "cancelled" while the session's says why (and the other way round).
      const streamOwnFault = ownFaultOfError(this.streamError);
      const ownFault = streamOwnFault ?? ownFaultOfError(failureError);
      const why = streamOwnFault ? this.streamError?.message : (failure ?? this.streamError?.message);
      return this.finish(status.UNAVAILABLE, `the connection to the worker failed: ${why ?? 'it closed before the worker answered'}`, '', ownFault);
    }
    const rstCode = this.stream.rstCode ?? 0;
    if (rstCode === NGHTTP2_REFUSED_STREAM) return this.finish(status.UNAVAILABLE, 'Stream refused by server', '');
    if (rstCode === NGHTTP2_CANCEL) return this.finish(status.CANCELLED, 'Call cancelled', '');
    if (this.httpStatus !== 0 && this.httpStatus !== 200) return this.finish(...statusOfHttp(this.httpStatus), '');
    this.finish(status.INTERNAL, `Received RST_STREAM with code ${rstCode} (Call ended without gRPC status)`, '');
  }

  private settleFromTrailers(trailers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader): void {
    const grpcStatus = trailers['grpc-status'];
    if (grpcStatus === undefined) {
      const httpStatus = trailers[':status'] ?? this.httpStatus;
      const [code, details] = httpStatus !== 200 && httpStatus !== 0 ? statusOfHttp(httpStatus) : [status.UNKNOWN, 'No status received'];
      return this.finish(code, details, '');
    }
    const code = Number(grpcStatus);
    const errorCode = trailers[metadataKeys.errorCode];
    this.finish(Number.isInteger(code) ? code : status.UNKNOWN, percentDecoded(trailers['grpc-message']), typeof errorCode === 'string' ? errorCode : '');
  }

  /** Ends the call from this side: RST_STREAM CANCEL, which the worker's grpc-js sees as "cancelled". */
  private cancel(code: status, details: string): void {
    if (this.ended) return;
    this.stream.close(NGHTTP2_CANCEL);
    this.finish(code, details, '');
  }

  private notify(): void {
    if (this.notified) return;
    this.notified = true;
    this.settings.onStartedOrEnded?.();
  }

  private finish(code: number, details: string, errorCode: string, ownFaultOfConnection?: OwnFaultReason): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.deadlineTimer);
    const { signal, resolve } = this.settings;
    signal.removeEventListener('abort', this.onAbort);
    this.connection.callEnded();
    this.notify();
    const started = this.started;
    if (code === status.OK) {
      if (this.response) return resolve({ kind: 'done', response: this.response });
      code = status.UNIMPLEMENTED;
      details = this.reader.partial ? 'the stream ended inside the response message' : 'No message received';
    }
    // As WorkerChannels maps grpc-js's errors.
    if (signal.aborted) return resolve({ kind: 'cancelled', started });
    if (code === status.DEADLINE_EXCEEDED) return resolve({ kind: 'deadline', started });
    if (started) return resolve({ kind: 'lost', message: details });
    const ownFault = ownFaultOfConnection ?? ownFaultOfStatus(code, errorCode);
    if (ownFault) return resolve({ kind: 'not-started', unreachable: false, code: errorCode, message: details, ownFault });
    // A worker's refusal carries a code; a call that never reached one is UNAVAILABLE without.
    resolve({ kind: 'not-started', unreachable: errorCode === '' && code === status.UNAVAILABLE, code: errorCode, message: details });
  }
}

function statusOfReadFailure(failure: GrpcReadFailure, maxBytes: number): [status, string] {
  switch (failure.kind) {
    case 'too-large':
      return [status.RESOURCE_EXHAUSTED, `Received message larger than max (${failure.bytes} vs ${maxBytes})`];
    case 'compressed':
      return [status.INTERNAL, 'Received a compressed message, but no compression was asked for'];
    case 'bad-flag':
      return [status.INTERNAL, `Received a message with an invalid flag byte ${failure.flag}`];
  }
}

/** As grpc-js maps an HTTP status that came without a gRPC status. */
function statusOfHttp(httpStatus: number): [status, string] {
  const details = `Received HTTP status code ${httpStatus}`;
  switch (httpStatus) {
    case 400:
      return [status.INTERNAL, details];
    case 401:
      return [status.UNAUTHENTICATED, details];
    case 403:
      return [status.PERMISSION_DENIED, details];
    case 404:
      return [status.UNIMPLEMENTED, details];
    case 429:
    case 502:
    case 503:
    case 504:
      return [status.UNAVAILABLE, details];
    default:
      return [status.UNKNOWN, details];
  }
}

/** Errors of the socket or session rather than of this stream (ERR_HTTP2_STREAM_ERROR is a RST_STREAM from the peer). */
function isConnectionError(error: Error | undefined): boolean {
  if (!error) return false;
  const code = (error as NodeJS.ErrnoException).code;
  return code !== 'ERR_HTTP2_STREAM_ERROR';
}

/** grpc-message is percent-encoded (gRPC over HTTP/2 spec); a malformed one is shown as it came. */
function percentDecoded(value: string | string[] | undefined): string {
  if (typeof value !== 'string') return '';
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

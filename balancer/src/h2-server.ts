import * as http2 from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { status } from '@grpc/grpc-js';
import type { Http2ServerTls } from '@headroom/proto';
import { H2ServerCall, type H2Method } from './h2-server-call';

const { HTTP_STATUS_UNSUPPORTED_MEDIA_TYPE, HTTP_STATUS_METHOD_NOT_ALLOWED } = http2.constants;

export interface H2GrpcServerOptions {
  /** TLS (http2ServerTls from @headroom/proto); plain text when undefined. */
  tls: Http2ServerTls | undefined;
  methods: readonly H2Method[];
  /** Calls one client connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS): more wait in the client. */
  maxStreamsPerConnection: number;
  /** Called when the server starts closing, after it stopped accepting connections (e.g. to end Watch calls). */
  onClosing?(): void;
}

const unsupportedMediaType: http2.OutgoingHttpHeaders = Object.freeze({ ':status': HTTP_STATUS_UNSUPPORTED_MEDIA_TYPE });
const methodNotAllowed: http2.OutgoingHttpHeaders = Object.freeze({ ':status': HTTP_STATUS_METHOD_NOT_ALLOWED });
const endStreamOptions: http2.ServerStreamResponseOptions = Object.freeze({ endStream: true });

/**
 * A gRPC server on node:http2 with the framing by hand (H2ServerCall): it serves the given
 * methods, answers as grpc-js's Server does (an unknown path UNIMPLEMENTED, a content type other
 * than application/grpc* HTTP 415), over plain text or TLS (with a client CA: mutual TLS, ALPN
 * h2), and closes as grpc-js's tryShutdown: no new connection, GOAWAY to each, the calls under way
 * finish.
 */
export class H2GrpcServer {
  private readonly server: http2.Http2Server | http2.Http2SecureServer;
  private readonly methods = new Map<string, H2Method>();
  // Open connections, for close(); as many as the server has sockets.
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private closing: Promise<void> | undefined;

  constructor(private readonly options: H2GrpcServerOptions) {
    for (const method of options.methods) this.methods.set(method.path, method);
    const serverOptions: http2.ServerOptions = {
      settings: { maxConcurrentStreams: options.maxStreamsPerConnection, enablePush: false },
      // As grpc-js: Node's per-session limit (10 MB) answers ENHANCE_YOUR_CALM under load;
      // what a connection may hold is bounded by its streams and their flow-control windows.
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
    };
    if (options.tls) {
      this.server = http2.createSecureServer({ ...serverOptions, ...options.tls, ALPNProtocols: ['h2'] });
      // A TLS connection that fails after its handshake: nothing to answer (grpc-js does the same).
      this.server.on('secureConnection', (socket: TLSSocket) => socket.on('error', () => undefined));
    } else {
      this.server = http2.createServer(serverOptions);
    }
    this.server.setTimeout(0);
    this.server.on('session', (session: http2.ServerHttp2Session) => this.onSession(session));
    this.server.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => this.onStream(stream, headers));
  }

  /** Listens on host:port (0: any free port); resolves with the port. Rejects as grpc-js's bindAsync when the port is taken. */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error) => reject(new Error(`No address added out of total 1 resolved errors: [${error.message}]`));
      this.server.once('error', onError);
      this.server.listen(port, host, () => {
        this.server.off('error', onError);
        const address = this.server.address();
        resolve(typeof address === 'object' && address ? address.port : port);
      });
    });
  }

  /** Graceful: stops accepting, sends GOAWAY, resolves once every call under way has ended. Idempotent. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      if (!this.server.listening) return resolve();
      this.server.close(() => resolve());
      this.options.onClosing?.();
      for (const session of this.sessions) session.close();
    });
    return this.closing;
  }

  /** Now: every connection is cut, calls under way with it. */
  destroy(): void {
    for (const session of this.sessions) session.destroy();
    if (this.server.listening) this.server.close();
  }

  private onSession(session: http2.ServerHttp2Session): void {
    if (this.closing) {
      session.close();
      return;
    }
    this.sessions.add(session);
    session.on('close', () => this.sessions.delete(session));
    // A connection that fails: its streams close with it (their calls see "cancelled").
    session.on('error', ignore);
  }

  private onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    // Its call sees a stream error as a close; without a listener it would be thrown.
    stream.on('error', ignore);
    const contentType = headers['content-type'];
    if (typeof contentType !== 'string' || !contentType.startsWith('application/grpc')) return refuse(stream, unsupportedMediaType);
    if (headers[':method'] !== 'POST') return refuse(stream, methodNotAllowed);
    const path = headers[':path'] ?? '';
    const method = this.methods.get(path);
    if (!method) {
      return refuse(stream, {
        ':status': 200,
        'content-type': 'application/grpc',
        'grpc-status': String(status.UNIMPLEMENTED),
        'grpc-message': encodeURI(`The server does not implement the method ${path}`),
      });
    }
    new H2ServerCall(stream, headers, method);
  }
}

function ignore(): void {}

/** Answers with `headers` alone, and reads and drops whatever the request still sends. */
function refuse(stream: http2.ServerHttp2Stream, headers: http2.OutgoingHttpHeaders): void {
  stream.respond(headers, endStreamOptions);
  stream.resume();
}

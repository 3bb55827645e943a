import * as grpc from '@grpc/grpc-js';
import {
  BalancerService,
  addHealthService,
  http2ServerTls,
  metadataKeys,
  receiveLimitInterceptor,
  serverCredentials,
  withTolerantDeserializers,
  type HealthStatus,
  type ServerTls,
  type SubmitRequest__Output,
  type SubmitResponse,
  type UnreadableRequest,
} from '@headroom/proto';
import { serviceErrorOf, type CallFailure } from './errors';
import { H2Health } from './h2-health';
import { H2GrpcServer } from './h2-server';
import type { H2Method } from './h2-server-call';

/** How Balancer.Submit is served: a grpc-js Server, or gRPC framed by hand on node:http2. */
export type ServerTransport = 'grpc-js' | 'http2';

/** The answer to one Submit: a failure, or the response. Called once. */
export type SubmitAnswer = (failure: CallFailure | null, response?: SubmitResponse) => void;

/** What the balancer gives the server: the same for both transports. */
export interface SubmitHandlers {
  /** One Submit. `request` is an UnreadableRequest when its bytes did not decode; `cancelled` aborts when the client gives up. */
  submit(request: SubmitRequest__Output | UnreadableRequest, cancelled: AbortSignal, answer: SubmitAnswer): void;
  /** The largest Submit message read. */
  maxSubmitMessageBytes: number;
  /** The answer to a message over that limit (HR_ERR_INVALID_TASK), counted. */
  tooLarge(): CallFailure;
}

/** Balancer/Submit and grpc.health.v1, served. */
export interface SubmitServer {
  /** Resolves with the port bound (0: any free one); rejects when it cannot bind (e.g. the port is taken). */
  listen(host: string, port: number): Promise<number>;
  setHealth(status: HealthStatus): void;
  /** Stops accepting, lets the calls under way finish. */
  close(): Promise<void>;
  /** Stops now (a failed start). */
  destroy(): void;
}

/** Largest number of calls one client connection has open at once on the http2 transport (more wait in the client). */
export const maxStreamsPerConnection = 10_000;

/** Reads the TLS files now (a wrong path stops the start before anything runs), and builds the server of `transport`. */
export function submitServer(transport: ServerTransport, tls: ServerTls | undefined, handlers: SubmitHandlers): SubmitServer {
  return transport === 'http2' ? h2SubmitServer(tls, handlers) : grpcJsSubmitServer(tls, handlers);
}

function grpcJsSubmitServer(tls: ServerTls | undefined, handlers: SubmitHandlers): SubmitServer {
  const credentials = serverCredentials(tls, 'tls');
  const server = new grpc.Server({
    'grpc.max_receive_message_length': handlers.maxSubmitMessageBytes,
    // A message over that limit, or one that does not decode, is the client's mistake: HR_ERR_INVALID_TASK,
    // not grpc-js's RESOURCE_EXHAUSTED / INTERNAL (see proto/src/unreadable-requests.ts for why this way).
    interceptors: [
      receiveLimitInterceptor({
        methodPaths: [BalancerService.service.Submit.path],
        errorCodeKey: metadataKeys.errorCode,
        tooLarge: () => {
          const { code, details, metadata } = serviceErrorOf(handlers.tooLarge());
          return { code: code!, details: details!, metadata: metadata ?? null };
        },
      }),
    ],
  });
  const setHealth = addHealthService(server, ['headroom.v1.Balancer']);
  const submit = (
    call: grpc.ServerUnaryCall<SubmitRequest__Output | UnreadableRequest, SubmitResponse>,
    callback: grpc.sendUnaryData<SubmitResponse>,
  ): void => {
    const abort = new AbortController();
    const onCancelled = () => abort.abort();
    call.on('cancelled', onCancelled);
    handlers.submit(call.request, abort.signal, (failure, response) => {
      call.off('cancelled', onCancelled);
      if (failure) callback(serviceErrorOf(failure));
      else callback(null, response);
    });
  };
  server.addService(withTolerantDeserializers(BalancerService.service, ['Submit']), { Submit: submit } as grpc.UntypedServiceImplementation);
  return {
    listen: (host, port) =>
      new Promise<number>((resolve, reject) => server.bindAsync(`${host}:${port}`, credentials, (error, bound) => (error ? reject(error) : resolve(bound)))),
    setHealth,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
    destroy: () => server.forceShutdown(),
  };
}

const submitMethod = withTolerantDeserializers(BalancerService.service, ['Submit']).Submit;

function failureMetadata(failure: CallFailure): Record<string, string> {
  const metadata: Record<string, string> = { [metadataKeys.errorCode]: failure.errorCode };
  if (failure.retryAfterMs !== undefined) metadata[metadataKeys.retryAfterMs] = String(failure.retryAfterMs);
  return metadata;
}

function h2SubmitServer(tls: ServerTls | undefined, handlers: SubmitHandlers): SubmitServer {
  const health = new H2Health(['headroom.v1.Balancer']);
  const submit: H2Method = {
    path: submitMethod.path,
    maxRequestBytes: handlers.maxSubmitMessageBytes,
    tooLarge: () => {
      const failure = handlers.tooLarge();
      return { code: failure.status, details: failure.details, metadata: failureMetadata(failure) };
    },
    // Never throws: bytes that do not decode are an UnreadableRequest, answered as an invalid task.
    decode: (bytes) => submitMethod.requestDeserialize(bytes),
    run: (call, request) =>
      handlers.submit(request as SubmitRequest__Output | UnreadableRequest, call.signal, (failure, response) => {
        if (failure) call.sendStatus({ code: failure.status, details: failure.details, metadata: failureMetadata(failure) });
        else call.sendLastMessage(submitMethod.responseSerialize(response!));
      }),
  };
  const server = new H2GrpcServer({
    tls: http2ServerTls(tls, 'tls'),
    methods: [submit, ...health.methods()],
    maxStreamsPerConnection,
    onClosing: () => health.endWatches(),
  });
  return {
    listen: (host, port) => server.listen(host, port),
    setHealth: (status) => health.setStatus(status),
    close: () => server.close(),
    destroy: () => server.destroy(),
  };
}

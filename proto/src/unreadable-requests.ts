import * as grpc from '@grpc/grpc-js';

/*
 * A request message a server cannot read is the client's mistake, and must say so: with
 * INVALID_ARGUMENT and a headroom-error-code, so that no client retries it. grpc-js answers
 * two kinds itself, before any handler runs (read in grpc-js 1.14, server-interceptors.ts):
 *
 * - over grpc.max_receive_message_length: RESOURCE_EXHAUSTED "Received message larger than
 *   max", the status our servers give for "full, try again". It is checked on the 5-byte
 *   length prefix, before the message is buffered, by BaseServerInterceptingCall, which then
 *   calls its own sendStatus: past every interceptor's responder (those only see statuses
 *   coming from the handler side). Raising the limit and checking the size later is no way
 *   out: the decoder buffers whole messages, so a client could make the server hold 4 GiB.
 * - bytes that do not decode: INTERNAL "Error deserializing request". Whatever the method's
 *   requestDeserialize throws is dropped, a status object included.
 *
 * So, for the first, an interceptor puts a wrapper on the base call's sendStatus (the one
 * place both kinds of status pass); for the second, the deserializer does not throw but
 * returns an UnreadableRequest the handler answers like any invalid request, through the
 * server's own code-to-status mapping. The tests that send such messages with a raw client
 * (balancer/test/unreadable-requests.test.ts, worker/test/unreadable-requests.test.ts) pin
 * this grpc-js behaviour down.
 */

type Status = Parameters<grpc.ServerInterceptingCallInterface['sendStatus']>[0];

/** What a tolerant deserializer returns instead of throwing: the handler answers it as invalid. */
export class UnreadableRequest {
  constructor(
    /** Full name of the message type expected, e.g. "headroom.v1.SubmitRequest". */
    readonly messageType: string,
    /** What the protobuf decoder said. */
    readonly reason: string,
  ) {}
}

/** `service` with the named methods' request deserializers returning UnreadableRequest rather than throwing. */
export function withTolerantDeserializers<S extends grpc.ServiceDefinition>(service: S, methods: readonly (keyof S & string)[]): S {
  const tolerant: Record<string, grpc.MethodDefinition<unknown, unknown>> = { ...service };
  for (const name of methods) {
    const method = service[name]!;
    const messageType = messageTypeOf(method);
    tolerant[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return method.requestDeserialize(bytes);
        } catch (error) {
          return new UnreadableRequest(messageType, error instanceof Error ? error.message : String(error));
        }
      },
    };
  }
  return tolerant as unknown as S;
}

/** proto-loader's method definitions carry the request type's short name; the path its package. */
function messageTypeOf(method: grpc.MethodDefinition<unknown, unknown>): string {
  const shortName = (method as { requestType?: { type?: { name?: unknown } } }).requestType?.type?.name;
  const servicePath = method.path.split('/')[1] ?? '';
  const packageName = servicePath.slice(0, servicePath.lastIndexOf('.'));
  return typeof shortName === 'string' ? (packageName ? `${packageName}.${shortName}` : shortName) : `the request of ${method.path}`;
}

export interface ReceiveLimitOptions {
  /** The methods it answers for, e.g. "/headroom.v1.Balancer/Submit" (others, e.g. health, keep grpc-js's answer). */
  methodPaths: readonly string[];
  /** The metadata key every status of the server's own carries (headroom-error-code). */
  errorCodeKey: string;
  /** The status a message over the receive limit gets instead of grpc-js's RESOURCE_EXHAUSTED. */
  tooLarge(): Status;
  /** Called for each such message (metrics). */
  onTooLarge?(): void;
}

/**
 * A server interceptor that answers a request over grpc.max_receive_message_length with
 * `tooLarge()`. A status reaches the wrapper from the handler (with `errorCodeKey` set) or
 * from grpc-js; of grpc-js's own, RESOURCE_EXHAUSTED only comes from the receive limit on a
 * server (its message, or its decompressed size), as servers get no send limit unless one is
 * set. Put it first in `interceptors`: it must see the base call.
 */
export function receiveLimitInterceptor(options: ReceiveLimitOptions): grpc.ServerInterceptor {
  return (method, call) => {
    if (!options.methodPaths.includes(method.path)) return new grpc.ServerInterceptingCall(call);
    // Anything else is another interceptor's wrapper, whose sendStatus the base call never calls
    // (e.g. interceptors given by the server credentials): leave grpc-js's answer then.
    if (call instanceof grpc.ServerInterceptingCall) return new grpc.ServerInterceptingCall(call);
    const sendStatus = call.sendStatus.bind(call);
    call.sendStatus = (status: Status) => {
      if (status.code === grpc.status.RESOURCE_EXHAUSTED && (status.metadata?.get(options.errorCodeKey).length ?? 0) === 0) {
        options.onTooLarge?.();
        return sendStatus(options.tooLarge());
      }
      return sendStatus(status);
    };
    return new grpc.ServerInterceptingCall(call);
  };
}

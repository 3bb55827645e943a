import * as http2 from 'node:http2';
import { status } from '@grpc/grpc-js';

/**
 * A call that reached no worker failed on one of two sides. Only the worker's side (refused,
 * reset, timed out: the worker or the path to it is down) may eject it, since an ejection takes
 * it from every balancer. This balancer's own TLS setup (a missing client certificate, a CA that
 * does not sign the workers' certificates) or credentials fail the same way on every worker:
 * those are its own fault (Envoy's "local origin" errors kept apart from the upstream's).
 */
export type OwnFaultReason = 'tls' | 'auth';

/** Certificate verification codes Node gives TLS errors (OpenSSL's X509_V_ERR_* names). */
const certificateErrorCodes = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_CRL',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CERT_SIGNATURE_FAILURE',
  'CRL_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'CRL_NOT_YET_VALID',
  'CRL_HAS_EXPIRED',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'ERROR_IN_CRL_LAST_UPDATE_FIELD',
  'ERROR_IN_CRL_NEXT_UPDATE_FIELD',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_CHAIN_TOO_LONG',
  'CERT_REVOKED',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'HOSTNAME_MISMATCH',
]);

/**
 * 'tls' when `error` (a socket's, session's or stream's) is a TLS handshake or certificate
 * failure, by its `code`: OpenSSL's alerts and errors (ERR_SSL_*, e.g. the worker's
 * "certificate required" alert), Node's TLS checks (ERR_TLS_*, e.g. a name the certificate does
 * not carry) and certificate verification codes. Anything else (ECONNREFUSED, ECONNRESET,
 * ETIMEDOUT, a connection that closed) says nothing against this balancer: undefined.
 */
export function ownFaultOfError(error: Error | undefined): OwnFaultReason | undefined {
  // A stream cancelled by its session's failure carries that failure as its cause.
  const cause = error?.cause;
  if (cause instanceof Error && cause !== error) return ownFaultOfCode(error) ?? ownFaultOfCode(cause);
  return ownFaultOfCode(error);
}

function ownFaultOfCode(error: Error | undefined): OwnFaultReason | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code !== 'string') return undefined;
  // A handshake that never finished in time is the worker's silence, not a certificate.
  if (code === 'ERR_TLS_HANDSHAKE_TIMEOUT') return undefined;
  return code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || certificateErrorCodes.has(code) ? 'tls' : undefined;
}

/** 'auth' for a call the worker's side turned away for its credentials without a refusal code of a worker (the gRPC statuses of HTTP 401 and 403). */
export function ownFaultOfStatus(code: number, workerErrorCode: string): OwnFaultReason | undefined {
  if (workerErrorCode !== '') return undefined;
  return code === status.UNAUTHENTICATED || code === status.PERMISSION_DENIED ? 'auth' : undefined;
}

/**
 * Connects to `address` over node:http2 with the TLS options the transport uses, and waits for
 * the worker's SETTINGS and a ping's answer: what fails on the way is why calls failed. grpc-js
 * reports a failed connection as text only ("No connection established. Last error: ..."), so
 * WorkerChannels asks this probe for an error with a code instead of reading that text.
 * Resolves undefined when the connection works (the failure was passing).
 */
export function probeConnection(address: string, tls: http2.SecureClientSessionOptions | undefined, timeoutMs: number): Promise<Error | undefined> {
  return new Promise((resolve) => {
    const session = http2.connect(`${tls ? 'https' : 'http'}://${address}`, { ...(tls ?? {}), settings: { enablePush: false } });
    let done = false;
    const end = (error: Error | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      session.destroy();
      resolve(error);
    };
    const timer = setTimeout(() => end(Object.assign(new Error(`no answer in ${timeoutMs} ms`), { code: 'ETIMEDOUT' })), timeoutMs);
    timer.unref();
    let socketError: Error | undefined;
    session.on('error', end);
    session.on('close', () => end(socketError ?? new Error('the connection closed')));
    session.once('connect', (_session, socket) => {
      // Under TLS 1.3 a worker that wants a client certificate says so after the handshake, in an
      // alert that reaches the socket (the session only sees its ping cancelled).
      socket.once('error', (error: Error) => {
        socketError = error;
        end(error);
      });
      let settingsRead = false;
      let pingAnswered = false;
      session.once('remoteSettings', () => {
        settingsRead = true;
        if (pingAnswered) end(undefined);
      });
      try {
        session.ping((error) => {
          if (error) return end(socketError ?? error);
          pingAnswered = true;
          if (settingsRead) end(undefined);
        });
      } catch (error) {
        end(error as Error);
      }
    });
  });
}

/**
 * One GET of JSON from an upstream through the worker's shared undici agent, with every way it
 * can go wrong turned into a coded TaskFailedError, except the task's own abort: that rethrows
 * the signal's reason, so the worker reports the deadline or cancellation itself.
 */
import { request, type Dispatcher } from 'undici';
import type { z } from 'zod';
import { TaskFailedError } from '@headroom/worker';

export const upstreamErrorCodes = {
  /** The upstream answered 5xx or 429, or its connection was refused or broke (an outage). */
  unavailable: 'HR_ERR_UPSTREAM_UNAVAILABLE',
  /** No answer (headers, or the rest of the body) within the call's timeout. */
  timeout: 'HR_ERR_UPSTREAM_TIMEOUT',
  /** The upstream refused the request (4xx other than 429): unknown bank or account, say. */
  rejected: 'HR_ERR_UPSTREAM_REJECTED',
  /** The answer was too large, not JSON, or not of the expected shape. */
  badResponse: 'HR_ERR_UPSTREAM_BAD_RESPONSE',
} as const;

export interface UpstreamCallOptions {
  /** The worker's shared agent (task.httpAgent). */
  dispatcher: Dispatcher;
  signal: AbortSignal;
  /** The whole call: waiting for one of the agent's connections, the answer's headers and its body. */
  timeoutMs: number;
  maxResponseBytes: number;
  /** Sent with the call besides `accept` (e.g. the bank handlers' x-headroom-cluster). */
  headers?: Readonly<Record<string, string>>;
}

export interface UpstreamAnswer<T> {
  value: T;
  /** The answer's JSON text. */
  text: string;
  durationMs: number;
}

// undici's own headers and body timeouts tick about every half second: too coarse for short
// calls, so each call has a timer of its own (and these stay as a backstop).
const timeoutErrorCodes = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);
/** Enough of an error answer to quote it. */
const maxErrorBodyBytes = 16 * 1024;

async function readText(body: Dispatcher.ResponseData['body'], limitBytes: number, url: string): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > limitBytes) {
      body.destroy();
      throw new TaskFailedError(upstreamErrorCodes.badResponse, `GET ${url}: answer larger than ${limitBytes} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function retryAfterMs(header: string | string[] | undefined): number | undefined {
  const seconds = Number(Array.isArray(header) ? header[0] : header);
  return header !== undefined && Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/** The upstream's own words for a failure, when it sent the simulator's `{"error": {"code", "message"}}`. */
function upstreamMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof parsed.error?.message === 'string') return `${String(parsed.error.code)}: ${parsed.error.message}`;
  } catch {
    // Not JSON: quote the start of it.
  }
  return text.slice(0, 200);
}

async function failureOf(statusCode: number, response: Dispatcher.ResponseData, url: string): Promise<TaskFailedError> {
  const text = await readText(response.body, maxErrorBodyBytes, url).catch(() => '');
  const said = `GET ${url}: ${statusCode} ${upstreamMessage(text)}`;
  if (statusCode >= 500 || statusCode === 429) {
    const retryAfter = retryAfterMs(response.headers['retry-after']);
    return new TaskFailedError(upstreamErrorCodes.unavailable, said, retryAfter === undefined ? undefined : { retryAfterMs: retryAfter });
  }
  return new TaskFailedError(upstreamErrorCodes.rejected, said);
}

async function call<S extends z.ZodType>(url: string, schema: S, options: UpstreamCallOptions, signal: AbortSignal): Promise<UpstreamAnswer<z.output<S>>> {
  const startedAt = performance.now();
  const response = await request(url, { method: 'GET', dispatcher: options.dispatcher, signal, headers: { ...options.headers, accept: 'application/json' } });
  if (response.statusCode < 200 || response.statusCode > 299) throw await failureOf(response.statusCode, response, url);
  const text = await readText(response.body, options.maxResponseBytes, url);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new TaskFailedError(upstreamErrorCodes.badResponse, `GET ${url}: the answer is not JSON`, { cause: error });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new TaskFailedError(
      upstreamErrorCodes.badResponse,
      `GET ${url}: unexpected answer at ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
    );
  }
  return { value: parsed.data, text, durationMs: performance.now() - startedAt };
}

export async function getUpstreamJson<S extends z.ZodType>(url: string, schema: S, options: UpstreamCallOptions): Promise<UpstreamAnswer<z.output<S>>> {
  options.signal.throwIfAborted();
  // Aborts at the call's timeout or with the task, whichever comes first.
  const callAbort = new AbortController();
  const abortWithTask = () => callAbort.abort(options.signal.reason);
  options.signal.addEventListener('abort', abortWithTask, { once: true });
  const timer = setTimeout(() => callAbort.abort(), options.timeoutMs);
  timer.unref();
  try {
    return await call(url, schema, options, callAbort.signal);
  } catch (error) {
    if (options.signal.aborted) throw options.signal.reason;
    if (error instanceof TaskFailedError) throw error;
    const code = (error as { code?: unknown }).code;
    if (callAbort.signal.aborted || (typeof code === 'string' && timeoutErrorCodes.has(code))) {
      throw new TaskFailedError(upstreamErrorCodes.timeout, `GET ${url}: no answer within ${options.timeoutMs} ms`, { cause: error });
    }
    throw new TaskFailedError(upstreamErrorCodes.unavailable, `GET ${url}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  } finally {
    clearTimeout(timer);
    options.signal.removeEventListener('abort', abortWithTask);
  }
}

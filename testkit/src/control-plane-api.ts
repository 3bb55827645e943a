/**
 * The one client of the control plane's REST API (/api/v1) for the tests, benchmarks, fault
 * suite and demo: a bearer token, JSON bodies, a deadline on every call (answer body included),
 * answer bodies read up to a bound, and one coded error for every failure.
 */
import { HeadroomError } from '@headroom/common';
import type {
  AuditAction,
  AuditEntry,
  BalancerView,
  Caller,
  ClusterSummary,
  IntegrationHealthView,
  LatencySeries,
  OverrideChangeRecord,
  ParallelismByCluster,
  PlanInput,
  ReadinessView,
  RollbackRecord,
  RollbackScope,
  Rollout,
  RolloutsView,
  TrafficChange,
  TrafficView,
  WorkerSummary,
} from '@headroom/control-plane';

export interface ControlPlaneApiOptions {
  /** The API's base: the control plane's address followed by /api/v1. */
  apiUrl: string;
  /** Sent as `Authorization: Bearer <token>`; null sends none (healthz, readyz, metrics and openapi.json need none). */
  token: string | null;
  /** Longest a call takes, its answer's body included. @default 15000 */
  timeoutMs?: number;
  /** Longest answer body read; a longer one fails the call. @default 33554432 (32 MiB) */
  maxBodyBytes?: number;
  /** Longest server-sent event (GET /events); a longer one ends the stream with an error. @default 4194304 (4 MiB) */
  maxEventBytes?: number;
}

export const controlPlaneApiDefaults = Object.freeze({
  timeoutMs: 15_000,
  maxBodyBytes: 32 * 1024 * 1024,
  maxEventBytes: 4 * 1024 * 1024,
});

/** Codes of failures on this side; an answer's own code (HR_ERR_*, see the control plane's apiErrorCodes) is kept as sent. */
export const controlPlaneApiErrorCodes = Object.freeze({
  /** No answer within timeoutMs. */
  timeout: 'HR_ERR_API_TIMEOUT',
  /** No answer at all: refused, reset, unknown host. */
  unreachable: 'HR_ERR_API_UNREACHABLE',
  /** The answer's body passed maxBodyBytes (or an event maxEventBytes). */
  answerTooLarge: 'HR_ERR_API_ANSWER_TOO_LARGE',
  /** A 2xx answer that is not what the call expects (not JSON; not an event stream). */
  unexpectedAnswer: 'HR_ERR_API_UNEXPECTED_ANSWER',
});

/**
 * A call failed. With `status`, the API answered it with an error: `code` is the answer's HR_ERR_*
 * code (HR_ERR_HTTP_<status> when the body carried none) and `details` the answer's `error`
 * object (with `fields` for HR_ERR_INVALID_REQUEST, `unleash` for HR_ERR_UNLEASH_FAILED).
 * Without `status`, no usable answer came: `code` is one of controlPlaneApiErrorCodes.
 */
export class ControlPlaneApiError extends HeadroomError {
  constructor(
    readonly status: number | undefined,
    code: string,
    message: string,
    readonly details: Readonly<Record<string, unknown>> = {},
    options: { cause?: unknown; retryAfterMs?: number } = {},
  ) {
    super(code, message, options);
    this.name = 'ControlPlaneApiError';
  }
}

export interface ApiRequest {
  method: string;
  /** Under /api/v1, with its query: "/traffic", "/audit?limit=10". */
  path: string;
  /** Sent as JSON (content-type application/json); a string is sent as it is. */
  body?: unknown;
  /** This call's token instead of the client's; null sends none. */
  token?: string | null;
  /** Sent last: they replace the client's (content-type, authorization). */
  headers?: Record<string, string>;
  timeoutMs?: number;
  /** Aborts the call; the abort's reason is thrown as it is. */
  signal?: AbortSignal;
}

export interface ApiAnswer {
  status: number;
  headers: Headers;
  /** The JSON answered, or the text when it is not JSON (metrics, an empty body). */
  body: unknown;
}

/** One server-sent event of GET /events: `change`, `ack`, `figures`, `override-change`. */
export interface ApiEvent {
  event: string;
  data: unknown;
}

export interface AuditQuery {
  /** 1 to 1000. @default 100 */
  limit?: number;
  /** Entries older than this id: the id of the last entry of the page before. */
  before?: string;
  action?: AuditAction;
  actor?: string;
}

export class ControlPlaneApi {
  readonly apiUrl: string;
  private readonly settings: Required<ControlPlaneApiOptions>;

  constructor(options: ControlPlaneApiOptions) {
    this.settings = { ...controlPlaneApiDefaults, ...options, apiUrl: options.apiUrl.replace(/\/+$/, '') };
    this.apiUrl = this.settings.apiUrl;
  }

  /** The same API with another token (null: none). */
  withToken(token: string | null): ControlPlaneApi {
    return new ControlPlaneApi({ ...this.settings, token });
  }

  /**
   * Any call; resolves with the answer whatever its status. Rejects with ControlPlaneApiError
   * (without status) when no answer came within the deadline or its body was too large.
   */
  async send(request: ApiRequest): Promise<ApiAnswer> {
    const { response, text } = await this.exchange(request);
    return { status: response.status, headers: response.headers, body: parseOrText(text) };
  }

  /** A call that must succeed: resolves with the JSON of a 2xx answer, else rejects with ControlPlaneApiError. */
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const { response, text } = await this.exchange({ method, path, body });
    if (!response.ok) throw answeredError(method, path, response, text);
    return parseJson<T>(method, path, response, text);
  }

  session(): Promise<Caller> {
    return this.call('GET', '/session');
  }

  async clusters(): Promise<ClusterSummary[]> {
    return (await this.call<{ clusters: ClusterSummary[] }>('GET', '/clusters')).clusters;
  }

  async workers(): Promise<WorkerSummary[]> {
    return (await this.call<{ workers: WorkerSummary[] }>('GET', '/workers')).workers;
  }

  async balancers(): Promise<BalancerView[]> {
    return (await this.call<{ balancers: BalancerView[] }>('GET', '/balancers')).balancers;
  }

  traffic(): Promise<TrafficView> {
    return this.call('GET', '/traffic');
  }

  /** PUT /traffic: percent of task keys to the candidate, by default and per integration. */
  setTraffic(change: TrafficChange): Promise<TrafficView> {
    return this.call('PUT', '/traffic', change);
  }

  async parallelism(): Promise<ParallelismByCluster> {
    return (await this.call<{ clusters: ParallelismByCluster }>('GET', '/parallelism')).clusters;
  }

  /** PUT /parallelism: max parallelism per cluster (null: the workers' own setting). */
  async setParallelism(clusters: ParallelismByCluster): Promise<ParallelismByCluster> {
    return (await this.call<{ clusters: ParallelismByCluster }>('PUT', '/parallelism', { clusters })).clusters;
  }

  /** POST /rollback: one integration, or all when `scope.integration` is absent. */
  rollback(scope: RollbackScope = {}): Promise<RollbackRecord> {
    return this.call('POST', '/rollback', scope);
  }

  resume(scope: RollbackScope = {}): Promise<OverrideChangeRecord> {
    return this.call('POST', '/resume', scope);
  }

  /** GET /rollouts: the rollout running or paused (else the latest), the finished ones, and whether this control plane's autopilot acts. */
  rollouts(): Promise<RolloutsView> {
    return this.call('GET', '/rollouts');
  }

  rollout(id: string): Promise<Rollout> {
    return this.call('GET', `/rollouts/${encodeURIComponent(id)}`);
  }

  /** POST /rollouts: starts a plan; its first step takes effect before the answer. */
  startRollout(plan: PlanInput): Promise<Rollout> {
    return this.call('POST', '/rollouts', plan);
  }

  /** POST /rollouts/{id}/pause|resume|abort, with an optional reason for the audit log. */
  changeRollout(id: string, action: 'pause' | 'resume' | 'abort', reason?: string): Promise<Rollout> {
    return this.call('POST', `/rollouts/${encodeURIComponent(id)}/${action}`, reason === undefined ? {} : { reason });
  }

  /** GET /latency/series over `window` ("30s", "5m", "1h"; the control plane's default 5m when absent). */
  latencySeries(window?: string): Promise<LatencySeries> {
    return this.call('GET', `/latency/series${window === undefined ? '' : `?window=${encodeURIComponent(window)}`}`);
  }

  /** GET /latency/integrations: each integration against its own recent past. */
  integrationHealth(): Promise<IntegrationHealthView> {
    return this.call('GET', '/latency/integrations');
  }

  /** One page of the audit log, newest first. */
  async audit(query: AuditQuery = {}): Promise<AuditEntry[]> {
    const search = new URLSearchParams(
      Object.entries(query).flatMap(([name, value]): [string, string][] => (value === undefined ? [] : [[name, String(value)]])),
    ).toString();
    return (await this.call<{ entries: AuditEntry[] }>('GET', `/audit${search ? `?${search}` : ''}`)).entries;
  }

  /** GET /readyz: what the control plane reaches, whether ready (200) or not (503). */
  async readiness(): Promise<ReadinessView> {
    const { response, text } = await this.exchange({ method: 'GET', path: '/readyz' });
    if (response.status !== 200 && response.status !== 503) throw answeredError('GET', '/readyz', response, text);
    return parseJson<ReadinessView>('GET', '/readyz', response, text);
  }

  /** GET /metrics: the Prometheus text. */
  async metrics(): Promise<string> {
    const { response, text } = await this.exchange({ method: 'GET', path: '/metrics' });
    if (!response.ok) throw answeredError('GET', '/metrics', response, text);
    return text;
  }

  /**
   * Opens GET /events; resolves once the stream is open (the deadline covers opening only). The
   * events arrive through the iterable until `signal` aborts (the iteration then ends) or the
   * stream ends or breaks (the iteration then throws).
   */
  async events(signal: AbortSignal): Promise<AsyncIterable<ApiEvent>> {
    const path = '/events';
    const controller = new AbortController();
    const stop = () => controller.abort(signal.reason);
    if (signal.aborted) stop();
    signal.addEventListener('abort', stop, { once: true });
    const timer = setTimeout(() => controller.abort(timeoutReason(this.settings.timeoutMs)), this.settings.timeoutMs);
    timer.unref();
    let response: Response;
    try {
      response = await this.fetch({ method: 'GET', path }, controller.signal);
    } catch (error) {
      signal.removeEventListener('abort', stop);
      throw this.noAnswerError('GET', path, error, signal, this.settings.timeoutMs);
    } finally {
      clearTimeout(timer);
    }
    const contentType = response.headers.get('content-type') ?? '';
    if (!response.ok || !contentType.startsWith('text/event-stream')) {
      // Stops reading once this is done (the error is read within the deadline too).
      const text = await readBounded(response, this.settings.maxBodyBytes, AbortSignal.timeout(this.settings.timeoutMs), `GET ${path}`).catch(() => '');
      controller.abort();
      signal.removeEventListener('abort', stop);
      if (!response.ok) throw answeredError('GET', path, response, text);
      throw new ControlPlaneApiError(
        undefined,
        controlPlaneApiErrorCodes.unexpectedAnswer,
        `GET ${path}: not an event stream: HTTP ${response.status} ${contentType}`,
      );
    }
    const maxEventBytes = this.settings.maxEventBytes;
    return {
      [Symbol.asyncIterator]: () =>
        readEvents(response, maxEventBytes, signal, () => {
          controller.abort();
          signal.removeEventListener('abort', stop);
        }),
    };
  }

  /** Sends the request and reads the answer's body, both within the deadline. */
  private async exchange(request: ApiRequest): Promise<{ response: Response; text: string }> {
    const timeoutMs = request.timeoutMs ?? this.settings.timeoutMs;
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = request.signal ? AbortSignal.any([deadline, request.signal]) : deadline;
    try {
      const response = await this.fetch(request, signal);
      return { response, text: await readBounded(response, this.settings.maxBodyBytes, signal, `${request.method} ${request.path}`) };
    } catch (error) {
      if (error instanceof ControlPlaneApiError) throw error;
      throw this.noAnswerError(request.method, request.path, error, request.signal, timeoutMs);
    }
  }

  private fetch(request: ApiRequest, signal: AbortSignal): Promise<Response> {
    const token = request.token === undefined ? this.settings.token : request.token;
    const body = request.body === undefined ? undefined : typeof request.body === 'string' ? request.body : JSON.stringify(request.body);
    return fetch(`${this.apiUrl}${request.path}`, {
      method: request.method,
      headers: {
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...request.headers,
      },
      ...(body === undefined ? {} : { body }),
      signal,
    });
  }

  /** The caller's own abort is rethrown as it is; a timeout or a failed connection becomes coded. */
  private noAnswerError(method: string, path: string, error: unknown, callerSignal: AbortSignal | undefined, timeoutMs: number): unknown {
    if (callerSignal?.aborted) return callerSignal.reason;
    const where = `${method} ${this.apiUrl}${path}`;
    if (error instanceof Error && error.name === 'TimeoutError') {
      return new ControlPlaneApiError(
        undefined,
        controlPlaneApiErrorCodes.timeout,
        `${where}: no answer within ${timeoutMs} ms (timeoutMs)`,
        {},
        { cause: error },
      );
    }
    const reason = error instanceof Error ? `${error.message}${error.cause instanceof Error ? ` (${error.cause.message})` : ''}` : String(error);
    return new ControlPlaneApiError(undefined, controlPlaneApiErrorCodes.unreachable, `${where}: ${reason}`, {}, { cause: error });
  }
}

/** The error a non-2xx answer carries: `{ error: { code, message, ... } }`. */
function answeredError(method: string, path: string, response: Response, text: string): ControlPlaneApiError {
  const body = parseOrText(text);
  const error =
    typeof body === 'object' && body !== null && 'error' in body && typeof body.error === 'object' && body.error !== null
      ? (body.error as Record<string, unknown>)
      : {};
  const code = typeof error.code === 'string' ? error.code : `HR_ERR_HTTP_${response.status}`;
  const message = typeof error.message === 'string' ? error.message : text.slice(0, 500);
  const retryAfterMs = typeof error.retryAfterMs === 'number' ? error.retryAfterMs : undefined;
  return new ControlPlaneApiError(
    response.status,
    code,
    `${method} ${path}: HTTP ${response.status} ${code}: ${message}`,
    error,
    retryAfterMs === undefined ? {} : { retryAfterMs },
  );
}

function parseJson<T>(method: string, path: string, response: Response, text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw new ControlPlaneApiError(
      undefined,
      controlPlaneApiErrorCodes.unexpectedAnswer,
      `${method} ${path}: HTTP ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`,
      {},
      { cause: error },
    );
  }
}

function timeoutReason(timeoutMs: number): DOMException {
  return new DOMException(`no answer within ${timeoutMs} ms`, 'TimeoutError');
}

function parseOrText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** The body as text, failing once it passes `maxBytes` (the rest is not read). */
async function readBounded(response: Response, maxBytes: number, signal: AbortSignal, where: string): Promise<string> {
  const tooLarge = () =>
    new ControlPlaneApiError(
      undefined,
      controlPlaneApiErrorCodes.answerTooLarge,
      `${where}: the answer (HTTP ${response.status}) is larger than ${maxBytes} bytes (maxBodyBytes)`,
    );
  if (Number(response.headers.get('content-length') ?? 0) > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  try {
    for (;;) {
      signal.throwIfAborted();
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > maxBytes) throw tooLarge();
      chunks.push(value);
    }
  } catch (error) {
    await reader.cancel().catch(() => undefined);
    throw error;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The events of an open stream, each at most `maxEventBytes`; `release` closes the connection. */
async function* readEvents(response: Response, maxEventBytes: number, signal: AbortSignal, release: () => void): AsyncGenerator<ApiEvent> {
  const decoder = new TextDecoder();
  let buffered = '';
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const event = /^event: (.+)$/m.exec(block)?.[1];
        const data = /^data: (.+)$/m.exec(block)?.[1];
        if (event && data) yield { event, data: JSON.parse(data) as unknown };
      }
      if (buffered.length > maxEventBytes) {
        throw new ControlPlaneApiError(
          undefined,
          controlPlaneApiErrorCodes.answerTooLarge,
          `GET /events: an event larger than ${maxEventBytes} bytes (maxEventBytes)`,
        );
      }
    }
  } catch (error) {
    if (signal.aborted) return;
    throw error;
  } finally {
    release();
  }
}

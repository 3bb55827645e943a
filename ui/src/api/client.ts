/**
 * Calls the control plane's REST API with the session's bearer token. Every failure becomes an
 * ApiError carrying what the API said ({ error: { code, message, fields?, unleash? } }), so the
 * pages can show it as it is.
 */

export const apiBasePath = '/api/v1';

/** A change waits for every balancer's acknowledgement and for Unleash: allow for both. */
const requestTimeoutMs = 30_000;

export interface FieldProblem {
  field: string;
  message: string;
}

/** What Unleash had done when a change failed midway (HR_ERR_UNLEASH_FAILED). */
export interface UnleashOutcome {
  status?: number;
  /** Applied before the failure and not taken back. */
  applied?: string[];
  /** Applied, then taken back. */
  undone?: string[];
}

/** Codes of failures that happen before the control plane changes anything. */
const changesNothing = new Set([
  'HR_ERR_INVALID_REQUEST',
  'HR_ERR_UNAUTHENTICATED',
  'HR_ERR_FORBIDDEN',
  'HR_ERR_NOT_FOUND',
  'HR_ERR_CONFLICT',
  'HR_ERR_UNSUPPORTED_MEDIA_TYPE',
  'HR_ERR_BODY_TOO_LARGE',
  'HR_ERR_BUSY',
  'HR_ERR_PROFILE_LOCKED',
  // PostgreSQL (the audit log) away: a traffic or parallelism change is refused before it starts.
  'HR_ERR_DATABASE_UNAVAILABLE',
]);

export class ApiError extends Error {
  constructor(
    /** HTTP status; 0 when no answer came. */
    readonly status: number,
    /** The API's code (HR_ERR_*), or HR_UI_NETWORK / HR_UI_BAD_ANSWER for failures on the way. */
    readonly code: string,
    message: string,
    readonly fields: FieldProblem[] = [],
    readonly unleash: UnleashOutcome | undefined = undefined,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  /** The control plane says it changed nothing (its message may say so too). */
  get changedNothing(): boolean {
    return changesNothing.has(this.code) || /nothing was (changed|started)/i.test(this.message);
  }

  /** No answer: the change may or may not have been made. */
  get outcomeUnknown(): boolean {
    return this.status === 0;
  }
}

export function isApiError(error: unknown): error is ApiError {
  return error instanceof ApiError;
}

export class ApiClient {
  constructor(readonly token: string) {}

  get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return this.request<T>('GET', path, undefined, signal);
  }

  send<T>(method: 'PUT' | 'POST' | 'DELETE', path: string, body: unknown = {}): Promise<T> {
    return this.request<T>(method, path, body);
  }

  /** A raw authenticated fetch, for downloads and the event stream. */
  fetch(path: string, init: RequestInit = {}): Promise<Response> {
    return fetch(`${apiBasePath}${path}`, { ...init, headers: { ...init.headers, authorization: `Bearer ${this.token}` } });
  }

  private async request<T>(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    const timeout = AbortSignal.timeout(requestTimeoutMs);
    let response: Response;
    try {
      response = await this.fetch(path, {
        method,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      const why = timeout.aborted ? `no answer within ${requestTimeoutMs / 1000} s` : error instanceof Error ? error.message : String(error);
      throw new ApiError(0, 'HR_UI_NETWORK', `the control plane could not be reached (${method} ${apiBasePath}${path}: ${why})`);
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (response.ok) {
      if (parsed === undefined)
        throw new ApiError(response.status, 'HR_UI_BAD_ANSWER', `${method} ${apiBasePath}${path} answered HTTP ${response.status} without JSON`);
      return parsed as T;
    }
    throw toApiError(response.status, parsed, `${method} ${apiBasePath}${path}`);
  }
}

function toApiError(status: number, body: unknown, call: string): ApiError {
  const error = (body as { error?: { code?: unknown; message?: unknown; fields?: unknown; unleash?: unknown } } | undefined)?.error;
  if (!error || typeof error.message !== 'string') {
    return new ApiError(status, 'HR_UI_BAD_ANSWER', `${call} failed with HTTP ${status} and no error description`);
  }
  const fields = Array.isArray(error.fields)
    ? error.fields.filter((f): f is FieldProblem => typeof f?.field === 'string' && typeof f?.message === 'string')
    : [];
  const unleash = typeof error.unleash === 'object' && error.unleash !== null ? (error.unleash as UnleashOutcome) : undefined;
  return new ApiError(status, typeof error.code === 'string' ? error.code : 'HR_UI_BAD_ANSWER', error.message, fields, unleash);
}

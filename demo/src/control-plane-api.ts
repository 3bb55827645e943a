/**
 * What the demo launcher does with the control plane: the API tokens it makes up for a run,
 * and the REST calls it makes (bearer token, JSON, a deadline on every call).
 */
import { randomBytes } from 'node:crypto';
import type { TrafficView } from '@headroom/control-plane';

export interface DemoApiTokens {
  /** May read and change (traffic, parallelism, rollback). */
  readonly operator: string;
  /** May only read. */
  readonly viewer: string;
}

/** Recorded in the control plane's audit log as the actor. */
export const apiTokenNames = Object.freeze({ operator: 'demo-operator', viewer: 'demo-viewer' });

export function makeApiTokens(): DemoApiTokens {
  return { operator: randomBytes(18).toString('base64url'), viewer: randomBytes(18).toString('base64url') };
}

/** The control plane CLI's secrets, given by env: command lines are visible to every local user (ps). */
export function controlPlaneSecretsEnv(tokens: DemoApiTokens, unleashAdminToken: string): Record<string, string> {
  return {
    HEADROOM_OPERATOR_TOKENS: `${apiTokenNames.operator}=${tokens.operator}`,
    HEADROOM_VIEWER_TOKENS: `${apiTokenNames.viewer}=${tokens.viewer}`,
    UNLEASH_ADMIN_TOKEN: unleashAdminToken,
  };
}

/** The API answered with an error: `code` is its HR_ERR_* code (or HTTP_<status> when the body had none). */
export class ControlPlaneApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ControlPlaneApiError';
  }
}

/**
 * One call to the API at `apiUrl` (…/api/v1). Resolves with the JSON body of a 2xx answer;
 * rejects with ControlPlaneApiError for any other, or with the fetch error (timeout, refused).
 */
export async function callControlPlane<T>(apiUrl: string, token: string, request: { method: 'GET' | 'PUT'; path: string; body?: unknown; timeoutMs: number }): Promise<T> {
  const response = await fetch(`${apiUrl}${request.path}`, {
    method: request.method,
    headers: { authorization: `Bearer ${token}`, ...(request.body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(request.body === undefined ? {} : { body: JSON.stringify(request.body) }),
    signal: AbortSignal.timeout(request.timeoutMs),
  });
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (!response.ok) {
    const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
    const code = typeof error?.code === 'string' ? error.code : `HTTP_${response.status}`;
    const message = typeof error?.message === 'string' ? error.message : text.slice(0, 500);
    throw new ControlPlaneApiError(response.status, code, `${request.method} ${request.path}: HTTP ${response.status} ${code}: ${message}`);
  }
  return body as T;
}

/**
 * PUT /traffic: `percent` of task keys to the candidate cluster, for integrations without a
 * share of their own (defaultPercent) and for each of `integrations` (configured in the control plane).
 */
export function setTrafficPercent(apiUrl: string, operatorToken: string, percent: number, integrations: readonly string[], timeoutMs: number): Promise<TrafficView> {
  const body = { defaultPercent: percent, ...(integrations.length > 0 ? { integrations: Object.fromEntries(integrations.map((name) => [name, percent])) } : {}) };
  return callControlPlane<TrafficView>(apiUrl, operatorToken, { method: 'PUT', path: '/traffic', body, timeoutMs });
}

export function readTraffic(apiUrl: string, token: string, timeoutMs: number): Promise<TrafficView> {
  return callControlPlane<TrafficView>(apiUrl, token, { method: 'GET', path: '/traffic', timeoutMs });
}

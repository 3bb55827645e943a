import { request } from 'undici';
import { UnleashFailedError } from '../errors';

export interface StrategyConstraint {
  contextName: string;
  operator: 'IN' | 'NOT_IN';
  values: string[];
  caseInsensitive?: boolean;
  inverted?: boolean;
}

export interface StrategyVariant {
  name: string;
  weight: number;
  weightType: 'variable' | 'fix';
  stickiness: string;
  payload?: { type: 'json' | 'string'; value: string };
}

/** A feature strategy as the Admin API reads and writes it. */
export interface FeatureStrategy {
  id?: string;
  name: string;
  title?: string | null;
  disabled?: boolean | null;
  sortOrder?: number;
  constraints: StrategyConstraint[];
  parameters: Record<string, string>;
  variants?: StrategyVariant[];
  segments?: number[];
}

export interface FeatureEnvironment {
  name: string;
  enabled: boolean;
  strategies: FeatureStrategy[];
}

export interface Feature {
  name: string;
  environments: FeatureEnvironment[];
}

export interface UnleashAdminOptions {
  /** Base URL, e.g. http://127.0.0.1:4242 */
  url: string;
  /** An admin token (or a personal access token / service account token with write access). */
  adminToken: string;
  /** @default 'default' */
  project?: string;
  /** @default 'development' */
  environment: string;
  /** Per request. @default 5000 */
  timeoutMs?: number;
}

/** A small client of the Unleash Admin API: only the calls Headroom makes. */
export class UnleashAdmin {
  readonly project: string;
  readonly environment: string;
  private readonly base: string;
  private readonly timeoutMs: number;

  constructor(private readonly options: UnleashAdminOptions) {
    this.base = options.url.replace(/\/+$/, '');
    this.project = options.project ?? 'default';
    this.environment = options.environment;
    this.timeoutMs = options.timeoutMs ?? 5000;
  }

  /** The feature, or undefined when it does not exist. */
  async getFeature(name: string): Promise<Feature | undefined> {
    return this.call<Feature>('GET', this.featurePath(name), undefined, { allowNotFound: true });
  }

  /** The feature's strategies and switch in our environment. */
  async getEnvironment(name: string): Promise<FeatureEnvironment | undefined> {
    const feature = await this.getFeature(name);
    return feature?.environments.find((env) => env.name === this.environment);
  }

  async createFeature(name: string, description: string): Promise<void> {
    await this.call('POST', `/api/admin/projects/${enc(this.project)}/features`, { name, description, type: 'release', impressionData: false });
  }

  async contextFieldExists(name: string): Promise<boolean> {
    return (await this.call('GET', `/api/admin/context/${enc(name)}`, undefined, { allowNotFound: true })) !== undefined;
  }

  async createContextField(name: string, description: string, stickiness: boolean): Promise<void> {
    await this.call('POST', '/api/admin/context', { name, description, stickiness, legalValues: [] });
  }

  async addStrategy(feature: string, strategy: FeatureStrategy): Promise<FeatureStrategy> {
    const { id: _id, ...body } = strategy;
    return (await this.call<FeatureStrategy>('POST', `${this.featurePath(feature)}/environments/${enc(this.environment)}/strategies`, body))!;
  }

  async updateStrategy(feature: string, strategy: FeatureStrategy & { id: string }): Promise<void> {
    const { id, ...body } = strategy;
    await this.call('PUT', `${this.featurePath(feature)}/environments/${enc(this.environment)}/strategies/${enc(id)}`, body);
  }

  async deleteStrategy(feature: string, strategyId: string): Promise<void> {
    await this.call('DELETE', `${this.featurePath(feature)}/environments/${enc(this.environment)}/strategies/${enc(strategyId)}`);
  }

  /** The environment switch: off sends every task to the baseline (the durable rollback). */
  async setEnabled(feature: string, enabled: boolean): Promise<void> {
    await this.call('POST', `${this.featurePath(feature)}/environments/${enc(this.environment)}/${enabled ? 'on' : 'off'}`);
  }

  /** Unleash's own health check (no token needed). */
  async healthy(): Promise<boolean> {
    try {
      const response = await request(`${this.base}/health`, { method: 'GET', headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs });
      await response.body.dump();
      return response.statusCode === 200;
    } catch {
      return false;
    }
  }

  private featurePath(name: string): string {
    return `/api/admin/projects/${enc(this.project)}/features/${enc(name)}`;
  }

  private async call<T>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    body?: unknown,
    options: { allowNotFound?: boolean } = {},
  ): Promise<T | undefined> {
    let response;
    try {
      response = await request(`${this.base}${path}`, {
        method,
        headers: { authorization: this.options.adminToken, 'content-type': 'application/json', accept: 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
    } catch (error) {
      throw new UnleashFailedError(`Unleash could not be reached (${method} ${path}): ${error instanceof Error ? error.message : String(error)}`, {}, error);
    }
    const text = await response.body.text();
    if (response.statusCode === 404 && options.allowNotFound) return undefined;
    if (response.statusCode >= 300) {
      throw new UnleashFailedError(`Unleash answered ${response.statusCode} to ${method} ${path}: ${unleashMessage(text)}`, { status: response.statusCode });
    }
    return text === '' ? undefined : (JSON.parse(text) as T);
  }
}

function enc(value: string): string {
  return encodeURIComponent(value);
}

function unleashMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { message?: string; details?: { message?: string }[] };
    return parsed.details?.[0]?.message ?? parsed.message ?? text.slice(0, 300);
  } catch {
    return text.slice(0, 300);
  }
}

import { contextFieldNames } from '@headroom/flags';
import { UnleashFailedError } from '../errors';
import type { FeatureEnvironment, FeatureStrategy, UnleashAdmin } from './admin-client';
import { applySteps, type ChangeStep } from './change-steps';

export interface IntegrationTraffic {
  /** Share of the integration's task keys that go to the candidate cluster. */
  percent: number;
  /** Its strategy is switched off (a durable per-integration rollback): 0% until resumed. */
  rolledBack: boolean;
}

export interface TrafficFlagState {
  /** The environment switch; off = everything to the baseline (the durable rollback of all). */
  enabled: boolean;
  defaultPercent: number;
  integrations: Record<string, IntegrationTraffic>;
}

export interface TrafficChange {
  defaultPercent?: number | undefined;
  integrations?: Record<string, number> | undefined;
}

const defaultTitle = 'default: integrations without a strategy of their own';

/**
 * The candidate-cluster flag in Unleash: one flexibleRollout strategy per integration
 * (constraint integration IN [name]) and a default (integration NOT_IN [all of them]), all
 * sticky on taskKey with the flag's name as group, so a key's bucket never changes and raising
 * a percentage only moves keys to the candidate. Unleash is the only copy of this state.
 */
export class TrafficFlag {
  constructor(
    private readonly admin: UnleashAdmin,
    readonly flagName: string,
    readonly integrations: readonly string[],
  ) {}

  /**
   * Creates what is missing (context fields, the flag, its strategies) and leaves existing values
   * alone. The control plane owns the flag: strategies of other shapes (Unleash adds a 100%
   * one when a flag is switched on without strategies) would send everyone to the candidate,
   * so they are removed; returns their titles.
   */
  async ensure(): Promise<string[]> {
    const fields: [string, string, boolean][] = [
      [contextFieldNames.taskKey, "The task's key (account or item): the stickiness of Headroom's traffic split", true],
      [contextFieldNames.integration, "The task's integration (upstream)", false],
      [contextFieldNames.cluster, 'The worker cluster (baseline or candidate)', false],
    ];
    for (const [name, description, stickiness] of fields) {
      if (!(await this.admin.contextFieldExists(name))) await this.admin.createContextField(name, description, stickiness);
    }
    const created = !(await this.admin.getFeature(this.flagName));
    if (created) {
      await this.admin.createFeature(
        this.flagName,
        'Headroom: share of tasks that run on the candidate (parallel) cluster, per integration. Managed by the Headroom control plane.',
      );
    }
    let env = await this.environment();
    let defaultStrategy = env.strategies.find(isDefaultStrategy);
    if (!defaultStrategy) {
      // Unleash refuses NOT_IN []: with no integrations of their own, the default has no constraint.
      const notInOurs =
        this.integrations.length > 0 ? [{ contextName: contextFieldNames.integration, operator: 'NOT_IN' as const, values: [...this.integrations] }] : [];
      defaultStrategy = await this.admin.addStrategy(this.flagName, this.strategy(defaultTitle, 0, ...notInOurs));
      env = await this.environment();
    }
    const defaultPercent = rolloutOf(defaultStrategy);
    for (const integration of this.integrations) {
      if (!env.strategies.some((s) => integrationOf(s) === integration)) {
        // Starts where the default had it, so adding it changes no task's cluster.
        await this.admin.addStrategy(
          this.flagName,
          this.strategy(`integration ${integration}`, defaultPercent, { contextName: contextFieldNames.integration, operator: 'IN', values: [integration] }),
        );
      }
    }
    const notIn = defaultStrategy.constraints.find((c) => c.contextName === contextFieldNames.integration && c.operator === 'NOT_IN');
    const known = new Set(notIn?.values ?? []);
    if (this.integrations.some((i) => !known.has(i))) {
      await this.admin.updateStrategy(this.flagName, {
        ...defaultStrategy,
        id: defaultStrategy.id!,
        constraints: [{ contextName: contextFieldNames.integration, operator: 'NOT_IN', values: [...new Set([...known, ...this.integrations])].sort() }],
      });
    }
    // On from the start, at 0%: switching it off is the durable rollback, so a new flag is not
    // "rolled back". Switched on only now, with strategies in place.
    if (created) await this.admin.setEnabled(this.flagName, true);
    return removeForeignStrategies(this.admin, this.flagName, await this.environment(), (s) => integrationOf(s) !== undefined || isDefaultStrategy(s));
  }

  async read(): Promise<TrafficFlagState> {
    const env = await this.environment();
    const defaultStrategy = env.strategies.find(isDefaultStrategy);
    if (!defaultStrategy)
      throw new UnleashFailedError(`flag ${this.flagName} has no default strategy ("${defaultTitle}"); restart the control plane to recreate it`);
    const integrations: Record<string, IntegrationTraffic> = {};
    for (const integration of this.integrations) {
      const strategy = env.strategies.find((s) => integrationOf(s) === integration);
      integrations[integration] = strategy
        ? { percent: rolloutOf(strategy), rolledBack: strategy.disabled === true }
        : { percent: rolloutOf(defaultStrategy), rolledBack: false };
    }
    return { enabled: env.enabled, defaultPercent: rolloutOf(defaultStrategy), integrations };
  }

  /** Sets percentages; all or nothing (see applySteps). Returns the state before and after. */
  async setPercents(change: TrafficChange): Promise<{ before: TrafficFlagState; after: TrafficFlagState }> {
    const env = await this.environment();
    const before = await this.read();
    const steps: ChangeStep[] = [];
    if (change.defaultPercent !== undefined && change.defaultPercent !== before.defaultPercent) {
      steps.push(this.rolloutStep(env.strategies.find(isDefaultStrategy)!, 'default', before.defaultPercent, change.defaultPercent));
    }
    for (const [integration, percent] of Object.entries(change.integrations ?? {})) {
      const strategy = env.strategies.find((s) => integrationOf(s) === integration);
      if (!strategy)
        throw new UnleashFailedError(`flag ${this.flagName} has no strategy for integration ${integration}; restart the control plane to recreate it`);
      const from = rolloutOf(strategy);
      if (from !== percent) steps.push(this.rolloutStep(strategy, `integration ${integration}`, from, percent));
    }
    await applySteps(steps);
    return { before, after: await this.read() };
  }

  /** Switches one integration's strategy off (durable rollback) or on again. */
  async setIntegrationRolledBack(integration: string, rolledBack: boolean): Promise<void> {
    const env = await this.environment();
    const strategy = env.strategies.find((s) => integrationOf(s) === integration);
    if (!strategy)
      throw new UnleashFailedError(`flag ${this.flagName} has no strategy for integration ${integration}; restart the control plane to recreate it`);
    if ((strategy.disabled === true) === rolledBack) return;
    await this.admin.updateStrategy(this.flagName, { ...strategy, id: strategy.id!, disabled: rolledBack });
  }

  async setEnabled(enabled: boolean): Promise<void> {
    await this.admin.setEnabled(this.flagName, enabled);
  }

  private rolloutStep(strategy: FeatureStrategy, what: string, from: number, to: number): ChangeStep {
    const write = (percent: number) => () =>
      this.admin.updateStrategy(this.flagName, { ...strategy, id: strategy.id!, parameters: { ...strategy.parameters, rollout: String(percent) } });
    return { describe: `${what}: ${from}% -> ${to}%`, apply: write(to), undo: write(from) };
  }

  private strategy(title: string, percent: number, ...constraints: FeatureStrategy['constraints']): FeatureStrategy {
    return {
      name: 'flexibleRollout',
      title,
      disabled: false,
      constraints,
      parameters: { rollout: String(percent), stickiness: contextFieldNames.taskKey, groupId: this.flagName },
      variants: [],
    };
  }

  private async environment(): Promise<FeatureEnvironment> {
    const env = await this.admin.getEnvironment(this.flagName);
    if (!env)
      throw new UnleashFailedError(
        `flag ${this.flagName} or its environment ${this.admin.environment} is missing in Unleash; restart the control plane to recreate it`,
      );
    return env;
  }
}

/** Deletes the strategies `ours` does not recognise; returns their titles (or names). */
export async function removeForeignStrategies(
  admin: UnleashAdmin,
  flagName: string,
  env: FeatureEnvironment,
  ours: (strategy: FeatureStrategy) => boolean,
): Promise<string[]> {
  const removed: string[] = [];
  for (const strategy of env.strategies) {
    if (ours(strategy) || !strategy.id) continue;
    await admin.deleteStrategy(flagName, strategy.id);
    removed.push(strategy.title || `${strategy.name} ${JSON.stringify(strategy.parameters)}`);
  }
  return removed;
}

function integrationOf(strategy: FeatureStrategy): string | undefined {
  const only = strategy.constraints.length === 1 ? strategy.constraints[0]! : undefined;
  return only && only.contextName === contextFieldNames.integration && only.operator === 'IN' && only.values.length === 1 ? only.values[0] : undefined;
}

/** Ours: integration NOT_IN [...], or (with no integrations configured) no constraint and our title. */
function isDefaultStrategy(strategy: FeatureStrategy): boolean {
  if (strategy.constraints.length === 0) return strategy.title === defaultTitle;
  return strategy.constraints.some((c) => c.contextName === contextFieldNames.integration && c.operator === 'NOT_IN');
}

function rolloutOf(strategy: FeatureStrategy): number {
  const n = Number(strategy.parameters.rollout ?? 0);
  return Number.isFinite(n) ? n : 0;
}

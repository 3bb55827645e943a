import { contextFieldNames, parseParallelismPayload } from '@headroom/flags';
import { UnleashFailedError } from '../errors';
import type { FeatureEnvironment, FeatureStrategy, UnleashAdmin } from './admin-client';
import { applySteps, type ChangeStep } from './change-steps';
import { removeForeignStrategies } from './traffic-flag';

/** Max parallelism per cluster as Unleash sets it; null = the workers' own setting applies. */
export type ParallelismByCluster = Record<string, number | null>;

/**
 * The max-parallelism flag in Unleash: per cluster, one strategy (constraint cluster IN [name],
 * rollout 100%) whose only variant carries {"maxParallelism": N}. No strategy for a cluster
 * means its workers use their own --max-parallelism.
 */
export class ParallelismFlag {
  constructor(
    private readonly admin: UnleashAdmin,
    readonly flagName: string,
    readonly clusters: readonly string[],
  ) {}

  /**
   * Creates the flag if missing and removes strategies of other shapes (returns their titles).
   * Unleash switches a flag's environment off when its last strategy goes, and adds a 100%
   * strategy of its own when one is switched on without any: so the switch is on exactly while
   * some cluster has a value (see syncSwitch).
   */
  async ensure(): Promise<string[]> {
    if (!(await this.admin.getFeature(this.flagName))) {
      await this.admin.createFeature(
        this.flagName,
        'Headroom: max parallelism of each cluster\'s workers (variant payload {"maxParallelism": N}). Managed by the Headroom control plane.',
      );
    }
    const removed = await removeForeignStrategies(this.admin, this.flagName, await this.environment(), (s) => clusterOf(s) !== undefined);
    await this.syncSwitch();
    return removed;
  }

  async read(): Promise<ParallelismByCluster> {
    const env = await this.environment();
    const result: ParallelismByCluster = {};
    for (const cluster of this.clusters) {
      const strategy = env.enabled ? env.strategies.find((s) => clusterOf(s) === cluster && s.disabled !== true) : undefined;
      result[cluster] = strategy ? (valueOf(strategy) ?? null) : null;
    }
    return result;
  }

  /** Sets (or, with null, clears) clusters' max parallelism; all or nothing (see applySteps). */
  async set(change: ParallelismByCluster): Promise<{ before: ParallelismByCluster; after: ParallelismByCluster }> {
    const env = await this.environment();
    const before = await this.read();
    const steps: ChangeStep[] = [];
    for (const [cluster, wanted] of Object.entries(change)) {
      const from = before[cluster] ?? null;
      if (from === wanted) continue;
      const existing = env.strategies.find((s) => clusterOf(s) === cluster);
      steps.push(this.step(cluster, existing, from, wanted));
    }
    await applySteps(steps);
    await this.syncSwitch();
    return { before, after: await this.read() };
  }

  private async syncSwitch(): Promise<void> {
    const env = await this.environment();
    if (!env.enabled && env.strategies.some((s) => clusterOf(s) !== undefined)) await this.admin.setEnabled(this.flagName, true);
  }

  private step(cluster: string, existing: FeatureStrategy | undefined, from: number | null, to: number | null): ChangeStep {
    let current = existing;
    const write = async (value: number | null) => {
      if (value === null) {
        if (current?.id) await this.admin.deleteStrategy(this.flagName, current.id);
        current = undefined;
      } else if (current?.id) {
        const next = { ...this.strategy(cluster, value), id: current.id };
        await this.admin.updateStrategy(this.flagName, next);
        current = next;
      } else {
        current = await this.admin.addStrategy(this.flagName, this.strategy(cluster, value));
      }
    };
    return { describe: `cluster ${cluster}: ${from ?? 'own setting'} -> ${to ?? 'own setting'}`, apply: () => write(to), undo: () => write(from) };
  }

  private strategy(cluster: string, maxParallelism: number): FeatureStrategy {
    return {
      name: 'flexibleRollout',
      title: `cluster ${cluster}: max parallelism ${maxParallelism}`,
      disabled: false,
      constraints: [{ contextName: contextFieldNames.cluster, operator: 'IN', values: [cluster] }],
      parameters: { rollout: '100', stickiness: 'default', groupId: this.flagName },
      variants: [
        {
          name: `max-parallelism-${maxParallelism}`,
          weight: 1000,
          weightType: 'variable',
          stickiness: 'default',
          payload: { type: 'json', value: JSON.stringify({ maxParallelism }) },
        },
      ],
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

function clusterOf(strategy: FeatureStrategy): string | undefined {
  const only = strategy.constraints.length === 1 ? strategy.constraints[0]! : undefined;
  return only && only.contextName === contextFieldNames.cluster && only.operator === 'IN' && only.values.length === 1 ? only.values[0] : undefined;
}

function valueOf(strategy: FeatureStrategy): number | undefined {
  const payload = strategy.variants?.[0]?.payload;
  return payload ? parseParallelismPayload(payload.value)?.maxParallelism : undefined;
}

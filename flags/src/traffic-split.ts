import type { FeatureInterface } from 'unleash-client/lib/feature';
import { contextFieldNames } from './flag-names';

/**
 * The candidate-cluster flag reduced to what routing depends on: the switch, the default share
 * and each integration's share (an integration whose strategy is switched off is left out). A
 * balancer reports this as its flag client has it; the control plane compares it with what
 * Unleash holds to tell when every balancer has a traffic change.
 */
export interface TrafficSplit {
  enabled: boolean;
  /** null when the flag has no default strategy. */
  defaultPercent: number | null;
  integrations: Record<string, number>;
}

/** Reads a flag definition of the control plane's shape: flexibleRollout strategies, integration IN [x] or NOT_IN [...]. */
export function trafficSplitOf(definition: FeatureInterface): TrafficSplit {
  const split: TrafficSplit = { enabled: definition.enabled, defaultPercent: null, integrations: {} };
  for (const strategy of definition.strategies ?? []) {
    if ((strategy as { disabled?: boolean }).disabled) continue;
    const percent = Number(strategy.parameters?.rollout ?? 100);
    const constraint = strategy.constraints?.find((c) => c.contextName === contextFieldNames.integration);
    if (constraint?.operator === 'IN') for (const integration of constraint.values) split.integrations[integration] = percent;
    else split.defaultPercent = percent;
  }
  return split;
}

/** Equal splits, whatever the order their integrations were listed in. */
export function sameTrafficSplit(a: TrafficSplit, b: TrafficSplit): boolean {
  const keys = (split: TrafficSplit) => Object.keys(split.integrations).sort();
  return (
    a.enabled === b.enabled &&
    a.defaultPercent === b.defaultPercent &&
    JSON.stringify(keys(a)) === JSON.stringify(keys(b)) &&
    keys(a).every((key) => a.integrations[key] === b.integrations[key])
  );
}

/** A split read back from elsewhere (a balancer's heartbeat in Redis), or undefined when it is not one. */
export function parseTrafficSplit(value: unknown): TrafficSplit | undefined {
  const candidate = value as Partial<TrafficSplit> | null;
  if (!candidate || typeof candidate.enabled !== 'boolean' || !(candidate.defaultPercent === null || typeof candidate.defaultPercent === 'number'))
    return undefined;
  const integrations = candidate.integrations;
  if (!integrations || typeof integrations !== 'object' || Object.values(integrations).some((percent) => typeof percent !== 'number')) return undefined;
  return { enabled: candidate.enabled, defaultPercent: candidate.defaultPercent, integrations };
}

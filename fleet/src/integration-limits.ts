import { InvalidIntegrationLimitError } from './errors';

/**
 * How many tasks of one integration may be in flight in one cluster at once, across every
 * balancer and proxyless client: a fixed count, a share of the cluster's capacity (rounded up,
 * so it follows the fleet as workers join and leave), or no limit.
 */
export type IntegrationLimit = { maxInFlight: number } | { shareOfCapacity: number } | { off: true };

/**
 * The limit of an integration that has none of its own: a share of the cluster's capacity, but
 * never below a floor. `off` turns it off.
 */
export type DefaultIntegrationLimit = { shareOfCapacity: number; minInFlight: number } | { off: true };

/**
 * Half the capacity: with two integrations or more, a slow one leaves at least half of every
 * cluster to the others, and a healthy one still has room for bursts twice its fair share of
 * two. At least 8 in flight, so that a small fleet (a laptop, a test) is not throttled to a few
 * tasks. An operator widens it per integration (or sets `off`) where one integration is most of
 * the traffic.
 */
export const defaultIntegrationLimit: DefaultIntegrationLimit = Object.freeze({ shareOfCapacity: 0.5, minInFlight: 8 });

/** Integration names as tasks carry them (the balancer validates tasks alike). */
const integrationPattern = /^[a-z0-9][a-z0-9._-]{0,63}$/;

const allowedKeys = new Set(['maxInFlight', 'shareOfCapacity', 'off']);

/**
 * Checks an integration name and its limit as a caller sent them (a REST body, a config file)
 * and returns the form the ledger stores ('max:<n>', 'share:<x>' or 'off'). Throws
 * InvalidIntegrationLimitError naming the field; the ledger checks a count against the
 * cluster's capacity when it writes it.
 */
export function encodeIntegrationLimit(integration: unknown, limit: unknown): { integration: string; spec: string } {
  if (typeof integration !== 'string' || !integrationPattern.test(integration)) {
    throw new InvalidIntegrationLimitError('integration', `got ${describe(integration)}, expected 1-64 characters of a-z, 0-9, ".", "_", "-" such as "bank-a"`);
  }
  if (typeof limit !== 'object' || limit === null || Array.isArray(limit)) {
    throw new InvalidIntegrationLimitError('limit', `got ${describe(limit)}, expected one of {"maxInFlight": n}, {"shareOfCapacity": x}, {"off": true}`);
  }
  const keys = Object.getOwnPropertyNames(limit);
  const unknown = keys.find((key) => !allowedKeys.has(key));
  if (unknown !== undefined || keys.length !== 1) {
    throw new InvalidIntegrationLimitError('limit', `got the fields ${JSON.stringify(keys)}, expected exactly one of "maxInFlight", "shareOfCapacity", "off"`);
  }
  const value = (limit as Record<string, unknown>)[keys[0]!];
  if (keys[0] === 'off') {
    if (value !== true) throw new InvalidIntegrationLimitError('limit.off', `got ${describe(value)}, expected true`);
    return { integration, spec: 'off' };
  }
  if (keys[0] === 'maxInFlight') {
    if (!Number.isSafeInteger(value) || (value as number) < 1)
      throw new InvalidIntegrationLimitError('limit.maxInFlight', `got ${describe(value)}, expected a whole number of tasks >= 1`);
    return { integration, spec: `max:${value as number}` };
  }
  if (typeof value !== 'number' || !(value > 0 && value <= 1))
    throw new InvalidIntegrationLimitError('limit.shareOfCapacity', `got ${describe(value)}, expected a number in (0, 1] such as 0.25`);
  return { integration, spec: `share:${value}` };
}

/** The limit from its stored form; null for a form this version does not know. */
export function decodeIntegrationLimit(spec: string): IntegrationLimit | null {
  if (spec === 'off') return { off: true };
  const max = /^max:(\d+)$/.exec(spec);
  if (max) return { maxInFlight: Number(max[1]) };
  const share = /^share:([\d.]+)$/.exec(spec);
  if (share && Number(share[1]) > 0 && Number(share[1]) <= 1) return { shareOfCapacity: Number(share[1]) };
  return null;
}

/** The default limit as settle-12.lua takes it: share (0: none) and floor. */
export function defaultLimitArgs(limit: DefaultIntegrationLimit): [number, number] {
  return 'off' in limit ? [0, 0] : [limit.shareOfCapacity, limit.minInFlight];
}

/** Checks a default limit given as an option; throws naming `field`. */
export function checkDefaultIntegrationLimit(limit: DefaultIntegrationLimit, field: string): DefaultIntegrationLimit {
  if ('off' in limit) return limit;
  if (!(limit.shareOfCapacity > 0 && limit.shareOfCapacity <= 1))
    throw new InvalidIntegrationLimitError(`${field}.shareOfCapacity`, `got ${describe(limit.shareOfCapacity)}, expected a number in (0, 1]`);
  if (!Number.isSafeInteger(limit.minInFlight) || limit.minInFlight < 0)
    throw new InvalidIntegrationLimitError(`${field}.minInFlight`, `got ${describe(limit.minInFlight)}, expected a whole number >= 0`);
  return limit;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 80));
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value);
  return Array.isArray(value) ? 'an array' : typeof value;
}

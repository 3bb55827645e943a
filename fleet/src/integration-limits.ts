import { InvalidIntegrationLimitError } from './errors';

/**
 * The most tasks of one integration that may start per second in one cluster, across every
 * balancer and proxyless client, for an upstream with a rate limit of its own. Enforced by
 * settle-12.lua as a GCRA (a token bucket kept as one timestamp) with a burst of one second of
 * the rate (at least one start). Optional beside any in-flight limit.
 */
export interface StartRateLimit {
  maxStartsPerSecond?: number;
}

/**
 * How many tasks of one integration may be in flight in one cluster at once, across every
 * balancer and proxyless client: a fixed count, a share of the cluster's capacity (rounded up,
 * so it follows the fleet as workers join and leave), or no limit; each optionally with a start
 * rate. A start rate alone keeps the default in-flight limit (`{"off": true, "maxStartsPerSecond": n}`
 * is the rate with no in-flight limit).
 */
export type IntegrationLimit =
  | ({ maxInFlight: number } & StartRateLimit)
  | ({ shareOfCapacity: number } & StartRateLimit)
  | ({ off: true } & StartRateLimit)
  | { maxStartsPerSecond: number };

/**
 * The limit of an integration that has none of its own: a share of the cluster's capacity, but
 * never below a floor, and optionally a start rate. `off` turns the in-flight part off.
 */
export type DefaultIntegrationLimit = ({ shareOfCapacity: number; minInFlight: number } & StartRateLimit) | ({ off: true } & StartRateLimit);

/**
 * The bounds of a start rate. Above a million a second the ledger's own settle calls are the
 * limit; below one start in 1,000 s a GCRA key would outlive any sensible retry.
 */
export const minStartsPerSecond = 0.001;
export const maxStartsPerSecond = 1_000_000;

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

/**
 * Throws InvalidIntegrationLimitError (field `integration`) unless `integration` is a name as
 * tasks carry them. The ledger keeps an integration's fields under its name and under prefixes
 * ending in ':' (keys.ts, `integrations`), which such a name cannot hold.
 */
export function checkIntegrationName(integration: unknown): asserts integration is string {
  if (typeof integration !== 'string' || !integrationPattern.test(integration)) {
    throw new InvalidIntegrationLimitError('integration', `got ${describe(integration)}, expected 1-64 characters of a-z, 0-9, ".", "_", "-" such as "bank-a"`);
  }
}

const inFlightKeys = ['maxInFlight', 'shareOfCapacity', 'off'];
const expectedForms =
  '{"maxInFlight": n}, {"shareOfCapacity": x}, {"off": true}, each optionally with "maxStartsPerSecond": r, or {"maxStartsPerSecond": r} alone';

/**
 * Checks an integration name and its limit as a caller sent them (a REST body, a config file)
 * and returns the form the ledger stores: the in-flight part ('max:<n>', 'share:<x>' or 'off'),
 * then ';rate:<r>' when it has a start rate ('rate:<r>' alone when it has no in-flight part).
 * Throws InvalidIntegrationLimitError naming the field; the ledger checks a count against the
 * cluster's capacity when it writes it.
 */
export function encodeIntegrationLimit(integration: unknown, limit: unknown): { integration: string; spec: string } {
  checkIntegrationName(integration);
  if (typeof limit !== 'object' || limit === null || Array.isArray(limit)) {
    throw new InvalidIntegrationLimitError('limit', `got ${describe(limit)}, expected one of ${expectedForms}`);
  }
  const keys = Object.getOwnPropertyNames(limit);
  const unknown = keys.find((key) => key !== 'maxStartsPerSecond' && !inFlightKeys.includes(key));
  const inFlightKey = keys.filter((key) => inFlightKeys.includes(key));
  if (unknown !== undefined || inFlightKey.length > 1 || keys.length === 0) {
    throw new InvalidIntegrationLimitError('limit', `got the fields ${JSON.stringify(keys)}, expected one of ${expectedForms}`);
  }
  const fields = limit as Record<string, unknown>;
  const rate = keys.includes('maxStartsPerSecond') ? `rate:${checkStartsPerSecond(fields.maxStartsPerSecond, 'limit.maxStartsPerSecond')}` : null;
  const inFlight = inFlightKey.length === 0 ? null : encodeInFlight(inFlightKey[0]!, fields[inFlightKey[0]!]);
  return { integration, spec: [inFlight, rate].filter((part) => part !== null).join(';') };
}

function encodeInFlight(key: string, value: unknown): string {
  if (key === 'off') {
    if (value !== true) throw new InvalidIntegrationLimitError('limit.off', `got ${describe(value)}, expected true`);
    return 'off';
  }
  if (key === 'maxInFlight') {
    if (!Number.isSafeInteger(value) || (value as number) < 1)
      throw new InvalidIntegrationLimitError('limit.maxInFlight', `got ${describe(value)}, expected a whole number of tasks >= 1`);
    return `max:${value as number}`;
  }
  if (typeof value !== 'number' || !(value > 0 && value <= 1))
    throw new InvalidIntegrationLimitError('limit.shareOfCapacity', `got ${describe(value)}, expected a number in (0, 1] such as 0.25`);
  return `share:${value}`;
}

/** A start rate as given; throws naming `field` unless it is a number in [minStartsPerSecond, maxStartsPerSecond]. */
export function checkStartsPerSecond(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < minStartsPerSecond || value > maxStartsPerSecond)
    throw new InvalidIntegrationLimitError(
      field,
      `got ${describe(value)}, expected a number of task starts per second from ${minStartsPerSecond} to ${maxStartsPerSecond} such as 1000`,
    );
  return value;
}

/** The limit from its stored form; null for a form this version does not know. */
export function decodeIntegrationLimit(spec: string): IntegrationLimit | null {
  const parts = spec.split(';');
  const last = parts[parts.length - 1]!;
  const rateMatch = /^rate:([\d.e+-]+)$/.exec(last);
  const rate = rateMatch ? Number(rateMatch[1]) : undefined;
  if (rate !== undefined && !(rate >= minStartsPerSecond && rate <= maxStartsPerSecond)) return null;
  const inFlightParts = rateMatch ? parts.slice(0, -1) : parts;
  const withRate = rate === undefined ? {} : { maxStartsPerSecond: rate };
  if (inFlightParts.length === 0) return rate === undefined ? null : { maxStartsPerSecond: rate };
  if (inFlightParts.length > 1) return null;
  const inFlight = decodeInFlight(inFlightParts[0]!);
  return inFlight && { ...inFlight, ...withRate };
}

function decodeInFlight(part: string): { maxInFlight: number } | { shareOfCapacity: number } | { off: true } | null {
  if (part === 'off') return { off: true };
  const max = /^max:(\d+)$/.exec(part);
  if (max) return { maxInFlight: Number(max[1]) };
  const share = /^share:([\d.]+)$/.exec(part);
  if (share && Number(share[1]) > 0 && Number(share[1]) <= 1) return { shareOfCapacity: Number(share[1]) };
  return null;
}

/** The start rate a limit sets; null when it sets none. */
export function startsPerSecondOf(limit: IntegrationLimit | DefaultIntegrationLimit): number | null {
  return limit.maxStartsPerSecond ?? null;
}

/** The default limit as settle-12.lua takes it: share (0: none), floor, and start rate (0: none). */
export function defaultLimitArgs(limit: DefaultIntegrationLimit): [number, number, number] {
  const rate = limit.maxStartsPerSecond ?? 0;
  return 'off' in limit ? [0, 0, rate] : [limit.shareOfCapacity, limit.minInFlight, rate];
}

/** Checks a default limit given as an option; throws naming `field`. */
export function checkDefaultIntegrationLimit(limit: DefaultIntegrationLimit, field: string): DefaultIntegrationLimit {
  if (limit.maxStartsPerSecond !== undefined) checkStartsPerSecond(limit.maxStartsPerSecond, `${field}.maxStartsPerSecond`);
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

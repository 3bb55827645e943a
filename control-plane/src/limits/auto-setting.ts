/**
 * The auto mode of a limit as operators set it and PostgreSQL keeps it: the ledger knows only
 * counts, so an auto limit is stored as 'auto:<min>:<max>' and the auto limiter writes the count.
 */
import { InvalidRequestError } from '../errors';
import type { AutoLimitSetting } from './auto-limit';

export interface AutoLimit {
  auto: AutoLimitSetting;
}

const autoSpec = /^auto:(\d+):(\d+)$/;

export function isAutoLimit(limit: unknown): limit is { auto: unknown } {
  return typeof limit === 'object' && limit !== null && !Array.isArray(limit) && Object.getOwnPropertyNames(limit).includes('auto');
}

/** Checks `{"auto": {"minInFlight": n, "maxInFlight": m}}` against the cluster's capacity; returns its stored form. */
export function encodeAutoLimit(limit: { auto: unknown }, capacitySlots: number): string {
  const bad = (field: string, message: string) => new InvalidRequestError([{ field: `body.limit.${field}`, message: `${message}; nothing was changed` }]);
  if (Object.getOwnPropertyNames(limit).length !== 1) throw bad('auto', 'expected {"auto": {...}} alone, no other field beside it');
  const auto = limit.auto;
  if (typeof auto !== 'object' || auto === null || Array.isArray(auto)) throw bad('auto', 'expected {"minInFlight": n, "maxInFlight": m}');
  const keys = Object.getOwnPropertyNames(auto);
  const unknown = keys.find((key) => key !== 'minInFlight' && key !== 'maxInFlight');
  if (unknown !== undefined) throw bad('auto', `got the field ${JSON.stringify(unknown)}, expected only "minInFlight" and "maxInFlight"`);
  const { minInFlight, maxInFlight } = auto as Record<string, unknown>;
  for (const [field, value] of [
    ['minInFlight', minInFlight],
    ['maxInFlight', maxInFlight],
  ] as const) {
    if (!Number.isSafeInteger(value) || (value as number) < 1)
      throw bad(`auto.${field}`, `got ${JSON.stringify(value) ?? 'nothing'}, expected a whole number of tasks >= 1`);
  }
  if ((minInFlight as number) > (maxInFlight as number))
    throw bad('auto.minInFlight', `got ${minInFlight as number}, above maxInFlight (${maxInFlight as number})`);
  if ((maxInFlight as number) > capacitySlots)
    throw bad('auto.maxInFlight', `got ${maxInFlight as number}, above the cluster's capacity (${capacitySlots} slots)`);
  return `auto:${minInFlight as number}:${maxInFlight as number}`;
}

/** The auto setting of a stored spec; null for any other spec. */
export function decodeAutoLimit(spec: string): AutoLimit | null {
  const match = autoSpec.exec(spec);
  return match ? { auto: { minInFlight: Number(match[1]), maxInFlight: Number(match[2]) } } : null;
}

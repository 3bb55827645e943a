/**
 * Worker handlers (--handlers) for the routing benchmark: every task waits, as a network-bound
 * task does, for a log-normal time drawn in the worker, so a worker's speed is the worker's own
 * (set by its env) and the load generator sends the same tasks to every worker:
 *   HEADROOM_BENCH_MEDIAN_SLEEP_MS  half the tasks wait less than this
 *   HEADROOM_BENCH_SLEEP_SIGMA      spread: 0.3 is steady, 1 makes p99 about 10x the median
 *   HEADROOM_BENCH_MAX_SLEEP_MS     the longest wait
 *   HEADROOM_BENCH_SLEEP_FACTORS    optional, JSON {"bank-b": 3}: an integration whose waits are
 *                                   that many times longer (its median too; still at most the longest)
 *   HEADROOM_BENCH_SLEEP_BY_TASK    optional, 1: the draw is a function of the task's sequence
 *                                   number (the end of its id, as the load generator numbers a
 *                                   phase's tasks), not of Math.random: every phase of the same
 *                                   rate and length runs the same tasks, so two policies'
 *                                   latencies differ by their placement only (common random
 *                                   numbers), not by which of them drew the longer tail
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { HandlerMap } from '@headroom/worker';
import { hashSeed, logNormal, seededRandom } from '@headroom/sim';

export const sleepEnv = {
  medianMs: 'HEADROOM_BENCH_MEDIAN_SLEEP_MS',
  sigma: 'HEADROOM_BENCH_SLEEP_SIGMA',
  maxMs: 'HEADROOM_BENCH_MAX_SLEEP_MS',
  factorByIntegration: 'HEADROOM_BENCH_SLEEP_FACTORS',
  byTask: 'HEADROOM_BENCH_SLEEP_BY_TASK',
} as const;

export interface SleepProfile {
  medianMs: number;
  sigma: number;
  maxMs: number;
  /** Integrations slower (or faster) than the rest: their waits times this. */
  factorByIntegration?: Readonly<Record<string, number>>;
  /** Draw each task's wait from its sequence number (see HEADROOM_BENCH_SLEEP_BY_TASK above). */
  byTask?: boolean;
}

/** The env of a worker whose tasks wait like that. */
export function sleepHandlersEnv(sleepProfile: SleepProfile): Record<string, string> {
  return {
    [sleepEnv.medianMs]: String(sleepProfile.medianMs),
    [sleepEnv.sigma]: String(sleepProfile.sigma),
    [sleepEnv.maxMs]: String(sleepProfile.maxMs),
    ...(sleepProfile.factorByIntegration ? { [sleepEnv.factorByIntegration]: JSON.stringify(sleepProfile.factorByIntegration) } : {}),
    ...(sleepProfile.byTask ? { [sleepEnv.byTask]: '1' } : {}),
  };
}

function readNumber(name: string): number {
  const value = Number(process.env[name]);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} is ${JSON.stringify(process.env[name])}: expected a number >= 0`);
  return value;
}

function readFactors(name: string): Record<string, number> {
  const text = process.env[name];
  if (text === undefined || text === '') return {};
  const parsed: unknown = JSON.parse(text);
  const valid =
    typeof parsed === 'object' &&
    parsed !== null &&
    !Array.isArray(parsed) &&
    Object.values(parsed).every((v) => typeof v === 'number' && Number.isFinite(v) && v > 0);
  if (!valid) throw new Error(`${name} is ${JSON.stringify(text)}: expected JSON such as {"bank-b": 3}, factors > 0`);
  return parsed as Record<string, number>;
}

/** A task's own slowdown from its payload ({"sleepFactor": x}, x > 0), 1 when it carries none. */
export function payloadSleepFactor(payload: Buffer): number {
  // Cheap test first: the routing benchmark's payloads are empty, and this runs on every task.
  if (payload.length === 0 || payload[0] !== 0x7b) return 1;
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload.toString('utf8'));
  } catch {
    return 1;
  }
  const factor = typeof parsed === 'object' && parsed !== null ? (parsed as { sleepFactor?: unknown }).sleepFactor : undefined;
  return typeof factor === 'number' && Number.isFinite(factor) && factor > 0 ? factor : 1;
}

/** A random() for one task, seeded by the sequence number that ends its id ("<run>-<sequence>"). */
export function taskRandom(taskId: string): () => number {
  return seededRandom(hashSeed(taskId.slice(taskId.lastIndexOf('-') + 1)));
}

// Read at the first task, not at import: the benchmark imports this module for sleepHandlersEnv.
let profile: Required<SleepProfile> | undefined;

export const handlers: HandlerMap = {
  '*': async (task, signal) => {
    profile ??= {
      medianMs: readNumber(sleepEnv.medianMs),
      sigma: readNumber(sleepEnv.sigma),
      maxMs: readNumber(sleepEnv.maxMs),
      factorByIntegration: readFactors(sleepEnv.factorByIntegration),
      byTask: process.env[sleepEnv.byTask] === '1',
    };
    const taskFactor = payloadSleepFactor(task.payload);
    const factor = (profile.factorByIntegration[task.integration] ?? 1) * taskFactor;
    const random = profile.byTask ? taskRandom(task.id) : Math.random;
    // The task's own factor stretches the cap too: an incident slows the bank's tail as well as its median.
    await sleep(Math.min(profile.maxMs * taskFactor, factor * logNormal(profile.medianMs, profile.sigma, random)), undefined, { signal });
    return '';
  },
};

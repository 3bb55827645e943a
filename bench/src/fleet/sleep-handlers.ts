/**
 * Worker handlers (--handlers) for the routing benchmark: every task waits, as a network-bound
 * task does, for a log-normal time drawn in the worker, so a worker's speed is the worker's own
 * (set by its env) and the load generator sends the same tasks to every worker:
 *   HEADROOM_BENCH_MEDIAN_SLEEP_MS  half the tasks wait less than this
 *   HEADROOM_BENCH_SLEEP_SIGMA      spread: 0.3 is steady, 1 makes p99 about 10x the median
 *   HEADROOM_BENCH_MAX_SLEEP_MS     the longest wait
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { HandlerMap } from '@headroom/worker';
import { logNormal } from '@headroom/sim';

export const sleepEnv = { medianMs: 'HEADROOM_BENCH_MEDIAN_SLEEP_MS', sigma: 'HEADROOM_BENCH_SLEEP_SIGMA', maxMs: 'HEADROOM_BENCH_MAX_SLEEP_MS' } as const;

/** The env of a worker whose tasks wait like that. */
export function sleepHandlersEnv(sleepProfile: { medianMs: number; sigma: number; maxMs: number }): Record<string, string> {
  return { [sleepEnv.medianMs]: String(sleepProfile.medianMs), [sleepEnv.sigma]: String(sleepProfile.sigma), [sleepEnv.maxMs]: String(sleepProfile.maxMs) };
}

function readNumber(name: string): number {
  const value = Number(process.env[name]);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} is ${JSON.stringify(process.env[name])}: expected a number >= 0`);
  return value;
}

// Read at the first task, not at import: the benchmark imports this module for sleepHandlersEnv.
let profile: { medianMs: number; sigma: number; maxMs: number } | undefined;

export const handlers: HandlerMap = {
  '*': async (_task, signal) => {
    profile ??= { medianMs: readNumber(sleepEnv.medianMs), sigma: readNumber(sleepEnv.sigma), maxMs: readNumber(sleepEnv.maxMs) };
    await sleep(Math.min(profile.maxMs, logNormal(profile.medianMs, profile.sigma, Math.random)), undefined, { signal });
    return '';
  },
};

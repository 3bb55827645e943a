/**
 * The simulated banks: how long each takes to answer and how often it fails. Latencies are
 * log-normal (most answers near the median, a long tail above it: p99 = median x e^(2.33 sigma)),
 * capped so one unlucky draw cannot hold a connection for ever.
 */
import { z } from 'zod';
import { settings } from '@headroom/common';
import { logNormal } from '../loadgen/workload';

export const bankProfileSchema = z
  .object({
    /** The bank's name in paths, and the integration's name in tasks. */
    name: settings.name(),
    /** Half the answers take less than this (before incidents and the time scale). */
    medianLatencyMs: z.number().positive('expected milliseconds > 0').max(600_000, 'expected milliseconds <= 600000'),
    /** Spread of the log-normal latency: 0 = always the median; 1 makes p99 about 10x the median. */
    latencySigma: z.number().min(0, 'expected a number from 0 to 3').max(3, 'expected a number from 0 to 3'),
    /** The longest answer (before incidents and the time scale). */
    maxLatencyMs: z.number().positive('expected milliseconds > 0').max(600_000, 'expected milliseconds <= 600000'),
    /** Share of answers that fail with a 500 or 503 after their latency. */
    errorRate: settings.share(),
  })
  .strict();

export type BankProfile = z.infer<typeof bankProfileSchema>;

/** What the simulator serves unless told otherwise: four banks from fast and steady to slow with a heavy tail. */
export const defaultBanks: readonly BankProfile[] = Object.freeze([
  /** p99 about 150 ms. */
  { name: 'bank-a', medianLatencyMs: 60, latencySigma: 0.4, maxLatencyMs: 5_000, errorRate: 0.002 },
  /** p99 about 770 ms. */
  { name: 'bank-b', medianLatencyMs: 150, latencySigma: 0.7, maxLatencyMs: 10_000, errorRate: 0.01 },
  /** p99 about 3.1 s. */
  { name: 'bank-c', medianLatencyMs: 300, latencySigma: 1.0, maxLatencyMs: 20_000, errorRate: 0.02 },
  /** A slow legacy bank: p99 about 16 s. */
  { name: 'bank-d', medianLatencyMs: 800, latencySigma: 1.3, maxLatencyMs: 30_000, errorRate: 0.05 },
]);

/** One answer's latency before incidents and the time scale. */
export function drawLatencyMs(bank: BankProfile, random: () => number): number {
  return Math.min(bank.maxLatencyMs, logNormal(bank.medianLatencyMs, bank.latencySigma, random));
}

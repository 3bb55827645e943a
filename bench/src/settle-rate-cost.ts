#!/usr/bin/env node
/**
 * settle-rate-cost: what a start rate on every integration adds to a settle call, in Redis's own
 * accounting. A micro-benchmark on a private redis-server (nobody else's commands count), through
 * the real Ledger: workers registered once, then batches of reservations and releases over a few
 * integrations, each batch one settle call. Two variants, alternated within the same run so that
 * the machine's load falls on both alike:
 *   - in flight: every integration has {"maxInFlight": capacity} (the limit path, no rate);
 *   - in flight + rate: the same with "maxStartsPerSecond": 1,000,000 (the GCRA path on every
 *     integration, never refusing: the cost of keeping the rate, not of refusals).
 * Figures per settle call: time inside EVALSHA (INFO commandstats) and Redis's main-thread CPU
 * (INFO cpu: parsing and replies included), medians of the repetitions.
 *   node bench/dist/src/settle-rate-cost.js [--smoke] [--out FILE]
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { Ledger, connectRedis, type IntegrationLimit } from '@headroom/fleet';
import { startPrivateRedis } from '@headroom/testkit';
import { readAccounting, spentBetween } from './scale/redis-accounting';
import { spread, formatSpread, type Spread } from './report/stats';
import { markdownTable } from './report/table';
import { writeJson } from './report/results-file';

interface Settings {
  workers: number;
  slotsPerWorker: number;
  integrations: number;
  /** Reservations, and releases, per settle call. */
  leasesPerCall: number;
  callsPerRepetition: number;
  repetitions: number;
}

const fullSettings: Settings = { workers: 100, slotsPerWorker: 30, integrations: 8, leasesPerCall: 32, callsPerRepetition: 500, repetitions: 7 };
const smokeSettings: Settings = { workers: 4, slotsPerWorker: 30, integrations: 4, leasesPerCall: 8, callsPerRepetition: 20, repetitions: 1 };

type Variant = 'in flight' | 'in flight + rate';
const variants: readonly Variant[] = ['in flight', 'in flight + rate'];

interface VariantResult {
  variant: Variant;
  evalshaUsPerCall: Spread;
  mainThreadCpuUsPerCall: Spread;
}

const cluster = 'bench';

async function registerWorkers(ledger: Ledger, settings: Settings): Promise<void> {
  for (let i = 0; i < settings.workers; i++) {
    await ledger.heartbeat(cluster, {
      workerId: `w${i}`,
      address: `127.0.0.1:${10_000 + i}`,
      capacity: settings.slotsPerWorker,
      draining: false,
      heldLeaseIds: [],
    });
  }
}

async function setLimits(ledger: Ledger, settings: Settings, variant: Variant): Promise<void> {
  const capacity = settings.workers * settings.slotsPerWorker;
  const limit: IntegrationLimit = variant === 'in flight' ? { maxInFlight: capacity } : { maxInFlight: capacity, maxStartsPerSecond: 1_000_000 };
  for (let i = 0; i < settings.integrations; i++) await ledger.setIntegrationLimit(cluster, `bank-${i}`, limit);
}

/** One repetition of a variant: each call releases the previous call's leases and reserves as many. */
async function runVariant(ledger: Ledger, redis: Redis, settings: Settings): Promise<{ evalshaUs: number; cpuUs: number; calls: number }> {
  let held: string[] = [];
  const callsBefore = ledger.settleCounts.calls;
  const before = await readAccounting(redis);
  for (let call = 0; call < settings.callsPerRepetition; call++) {
    // Asked in one turn of the event loop: the batcher sends them as one settle call.
    const releases = held.map((leaseId) => ledger.release(cluster, leaseId));
    const reservations = Array.from({ length: settings.leasesPerCall }, (_, i) =>
      ledger.reserve(cluster, { priority: 'background', balancerId: 'bench', waitIfNone: false, integration: `bank-${i % settings.integrations}` }),
    );
    const [, reserved] = await Promise.all([Promise.all(releases), Promise.all(reservations)]);
    held = reserved.flatMap((reservation) => (reservation.ok ? [reservation.leaseId] : []));
    if (held.length !== settings.leasesPerCall) throw new Error(`only ${held.length} of ${settings.leasesPerCall} reservations got a slot`);
  }
  const spent = spentBetween(before, await readAccounting(redis));
  const calls = ledger.settleCounts.calls - callsBefore;
  // Not counted: the slots go back for the next repetition.
  await Promise.all(held.map((leaseId) => ledger.release(cluster, leaseId)));
  return { evalshaUs: spent.commands.evalsha?.usec ?? Number.NaN, cpuUs: spent.mainThreadCpuUs, calls };
}

export async function runSettleRateCost(smoke: boolean): Promise<{ settings: Settings; results: VariantResult[] }> {
  const settings = smoke ? smokeSettings : fullSettings;
  const server = await startPrivateRedis();
  const redis = connectRedis(server.url);
  // INFO on a connection of its own (its commands are not EVALSHA).
  const accounting = new Redis(server.url);
  try {
    await new Promise((resolve) => redis.once('ready', resolve));
    // A batch goes out at once when the previous one has answered: one call per loop turn here.
    const ledger = new Ledger(redis, { keyPrefix: 'bench', keptForUserPresentShare: 0, batchWindowMs: 0 });
    await registerWorkers(ledger, settings);
    const perCall = new Map<Variant, { evalsha: number[]; cpu: number[] }>(variants.map((v) => [v, { evalsha: [], cpu: [] }]));
    for (let repetition = 0; repetition < settings.repetitions; repetition++) {
      // Alternated, and each repetition starts with the other variant: drift in the machine's load falls on both.
      const order = repetition % 2 === 0 ? variants : [...variants].reverse();
      for (const variant of order) {
        await setLimits(ledger, settings, variant);
        const { evalshaUs, cpuUs, calls } = await runVariant(ledger, accounting, settings);
        perCall.get(variant)!.evalsha.push(evalshaUs / calls);
        perCall.get(variant)!.cpu.push(cpuUs / calls);
        process.stdout.write(`  ${variant}: ${(evalshaUs / calls).toFixed(1)} µs in EVALSHA, ${(cpuUs / calls).toFixed(1)} µs main thread per call\n`);
      }
    }
    const results = variants.map((variant) => ({
      variant,
      evalshaUsPerCall: spread(perCall.get(variant)!.evalsha),
      mainThreadCpuUsPerCall: spread(perCall.get(variant)!.cpu),
    }));
    return { settings, results };
  } finally {
    redis.disconnect();
    accounting.disconnect();
    await server.stop();
  }
}

function table(result: { settings: Settings; results: VariantResult[] }): string {
  const { settings } = result;
  const header = [`variant (${settings.leasesPerCall} reservations + ${settings.leasesPerCall} releases per call, ${settings.integrations} integrations)`];
  return markdownTable(
    [...header, 'µs in EVALSHA per call, median (min..max)', 'µs main thread per call, median (min..max)'],
    result.results.map((r) => [r.variant, formatSpread(r.evalshaUsPerCall, 1), formatSpread(r.mainThreadCpuUsPerCall, 1)]),
  );
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { smoke: { type: 'boolean', default: false }, out: { type: 'string' } }, strict: true });
  const result = await runSettleRateCost(values.smoke);
  const outPath = values.out ? path.resolve(values.out) : path.join(os.tmpdir(), 'headroom-bench', `settle-rate-cost${values.smoke ? '.smoke' : ''}.json`);
  writeJson(outPath, result);
  process.stdout.write(`\n${table(result)}\n\nJSON: ${outPath}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`settle-rate-cost: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});

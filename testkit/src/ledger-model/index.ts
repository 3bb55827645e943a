/**
 * A model-based test of the slot ledger, shared by fleet's test (a few seconds, in `npm test`)
 * and the fault suite's long run: random interleavings of a small fleet's life (reservations,
 * dispatches that run or not, answers, releases arriving, lost or sent twice, heartbeats on time
 * or late, workers and balancers dying, time passing, sweeps) against a real Redis, compared at
 * every step with what the ledger's contract says it must hold, and at checkpoints with the
 * bound in docs/ledger.md: free slots = capacity - what each worker truly runs.
 *
 * It lives in the testkit, not in fleet's tests, so that the fault suite runs the same property
 * without importing another package's dist/test, and fast-check stays out of fleet's runtime
 * dependencies.
 */
import fc from 'fast-check';
import { connectRedis, waitUntilReady } from '@headroom/fleet';
import { ledgerCommand, type LedgerCommand } from './commands';
import { LedgerModelRun, type LedgerModelConnections, type LedgerModelStats, type LedgerModelTiming } from './run';

export { Dispatch, GiveUp, Heartbeat, KillBalancer, KillWorker, RestartWorker, SendBatch, Step, TaskEnds, WorkerRelease, type LedgerCommand } from './commands';
export type { LedgerModelStats, LedgerModelTiming } from './run';

export interface LedgerModelOptions extends Partial<LedgerModelTiming> {
  /** Most steps in one run (fast-check shrinks failing runs from there). @default 60 */
  maxCommands?: number;
}

/**
 * Short periods keep a run fast (each checkpoint waits one grace, or one sweep timeout after a
 * worker died); Redis's clock is read around every call, so their length does not make the
 * model guess.
 */
export const ledgerModelDefaults: Required<LedgerModelOptions> = {
  maxCommands: 60,
  dispatchGraceMs: 20,
  sweepAfterMs: 60,
};

/**
 * fc.assert's parameters for `numRuns` runs: the failing step's message with its run's story in
 * the report, and a failure replayed from HEADROOM_LEDGER_MODEL_SEED and HEADROOM_LEDGER_MODEL_PATH
 * (the seed and path fast-check prints).
 */
export function ledgerModelAssertParameters(numRuns: number): fc.Parameters<unknown> {
  const seed = process.env.HEADROOM_LEDGER_MODEL_SEED;
  const path = process.env.HEADROOM_LEDGER_MODEL_PATH;
  return { numRuns, includeErrorInReport: true, ...(seed ? { seed: Number(seed) } : {}), ...(path ? { path } : {}) };
}

/** The fleet a run starts with: its workers' capacities and how many balancers. */
export interface FleetShape {
  capacities: number[];
  balancerCount: number;
}

/** 2 or 3 workers of 1 to 4 slots, 1 or 2 balancers. */
const fleetShape: fc.Arbitrary<FleetShape> = fc.record({
  capacities: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 2, maxLength: 3 }),
  balancerCount: fc.integer({ min: 1, max: 2 }),
});

/** The connections the runs share (opening four per run would cost more than a run). */
export class LedgerModel {
  readonly stats: LedgerModelStats = { runs: 0, events: {} };

  private constructor(private readonly connections: LedgerModelConnections) {}

  static async open(redisUrl: string): Promise<LedgerModel> {
    const connections = { balancers: [connectRedis(redisUrl), connectRedis(redisUrl)], workers: connectRedis(redisUrl), observer: connectRedis(redisUrl) };
    const all = [...connections.balancers, connections.workers, connections.observer];
    try {
      await Promise.all(all.map((redis) => waitUntilReady(redis, redisUrl)));
    } catch (error) {
      all.forEach((redis) => redis.disconnect());
      throw error;
    }
    return new LedgerModel(connections);
  }

  /**
   * The property: any run of steps, ended by a checkpoint, keeps the ledger to its contract at
   * every step and to the bound at every checkpoint.
   */
  property(options: LedgerModelOptions = {}): fc.IAsyncPropertyWithHooks<[FleetShape, Iterable<LedgerCommand>]> {
    const { maxCommands, ...timing } = { ...ledgerModelDefaults, ...options };
    return fc.asyncProperty(fleetShape, fc.commands([ledgerCommand], { maxCommands, size: 'max' }), (shape, commands) => this.check(shape, commands, timing));
  }

  /**
   * One run: these steps on a fleet of this shape (a key prefix of its own), then a checkpoint.
   * The property's runs, and a fixed interleaving replayed as a test of its own.
   */
  async check(shape: FleetShape, commands: Iterable<LedgerCommand>, timing: LedgerModelTiming = ledgerModelDefaults): Promise<void> {
    this.stats.runs++;
    const run = LedgerModelRun.create(this.connections, timing, this.stats, shape.capacities, shape.balancerCount);
    try {
      await run.start();
      await fc.asyncModelRun(() => ({ model: run.fleet, real: run }), commands);
      // Tasks still run here: the bound must hold under load, not only once all is quiet.
      await run.checkpoint();
    } finally {
      await run.close();
    }
  }

  close(): void {
    for (const redis of [...this.connections.balancers, this.connections.workers, this.connections.observer]) redis.disconnect();
  }
}

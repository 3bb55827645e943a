/**
 * The ledger at the size it is for: 4,000 workers of 30 slots (simulated, each heartbeating as a
 * real worker does, multiplexed on one connection) converge to free = capacity - in flight on
 * every worker within three heartbeat rounds after Redis loses its data, by FLUSHALL or restart.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { eventually, startPrivateRedis } from '@headroom/testkit';
import { Ledger, connectRedis } from '../src/index';

const workerCount = 4000;
const slotsPerWorker = 30;
/** Heartbeats in flight at once: a fleet's heartbeats arrive spread over the period, not all at once. */
const inFlight = 256;
const maxRounds = 3;

interface SimulatedWorker {
  workerId: string;
  address: string;
  /** The leases of the tasks it runs: what it says in each heartbeat. */
  running: string[];
}

test(
  `${workerCount} workers of ${slotsPerWorker} slots converge within ${maxRounds} heartbeat rounds after FLUSHALL and after a Redis restart`,
  { timeout: 180_000 },
  async (t) => {
    const redis = await startPrivateRedis();
    t.after(() => redis.stop(true));
    const connection = connectRedis(redis.url);
    t.after(() => connection.disconnect());
    await new Promise((resolve) => connection.once('ready', resolve));
    const ledger = new Ledger(connection, { keyPrefix: 'convergence', keptForUserPresentShare: 0.1 });
    const workers: SimulatedWorker[] = Array.from({ length: workerCount }, (_, i) => ({
      workerId: `w${i}`,
      address: `10.0.${Math.floor(i / 250)}.${i % 250}:7800`,
      running: [],
    }));

    /** What the last heartbeat of the round told its worker to multiply its period by. */
    let heartbeatScale = 0;
    const heartbeatRound = async () => {
      const startedAt = performance.now();
      let next = 0;
      const lane = async () => {
        for (let i = next++; i < workers.length; i = next++) {
          const w = workers[i]!;
          heartbeatScale = (
            await ledger.heartbeat('c', { workerId: w.workerId, address: w.address, capacity: slotsPerWorker, draining: false, heldLeaseIds: w.running })
          ).heartbeatScale;
        }
      };
      await Promise.all(Array.from({ length: inFlight }, lane));
      return performance.now() - startedAt;
    };
    /** Workers whose free slots in the ledger are not capacity - running, and whether the totals agree. */
    const disagreements = async () => {
      const snap = await ledger.snapshot('c');
      const byId = new Map(snap.workers.map((w) => [w.workerId, w]));
      const wrong = workers.filter((w) => byId.get(w.workerId)?.freeSlots !== slotsPerWorker - w.running.length).length;
      const expectedFree = workers.reduce((sum, w) => sum + Math.max(0, slotsPerWorker - w.running.length), 0);
      const totalsAgree =
        snap.totalCapacity === workerCount * slotsPerWorker &&
        snap.totalFree === expectedFree &&
        snap.leases === workers.reduce((sum, w) => sum + w.running.length, 0);
      return { wrong, totalsAgree, missing: workerCount - snap.workers.length };
    };

    // A busy fleet, filled through the ledger as balancers fill it: every reserve lands on a
    // worker, which runs the task (so says its next heartbeat).
    await heartbeatRound();
    // 4,000 workers beat every 4 s instead of every second (LedgerOptions.workersAtFullHeartbeatRate):
    // a round of heartbeats is what a period holds, however long.
    assert.equal(heartbeatScale, workerCount / 1000);
    const tasks = Math.floor(workerCount * slotsPerWorker * 0.6);
    let reserved = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (reserved < tasks) {
          reserved++;
          const reservation = await ledger.reserve('c', { priority: 'user', balancerId: 'b', waitIfNone: false });
          assert.ok(reservation.ok, JSON.stringify(reservation));
          workers[Number(reservation.workerId.slice(1))]!.running.push(reservation.leaseId);
        }
      }),
    );
    const roundMs = await heartbeatRound();
    assert.deepEqual(await disagreements(), { wrong: 0, totalsAgree: true, missing: 0 }, 'the ledger agrees before anything breaks');
    t.diagnostic(`a round of ${workerCount} heartbeats took ${roundMs.toFixed(0)} ms here; ${tasks} tasks in flight`);

    const roundsToConverge = async (what: string) => {
      for (let round = 1; round <= maxRounds; round++) {
        await heartbeatRound();
        const state = await disagreements();
        if (state.wrong === 0 && state.totalsAgree && state.missing === 0) return round;
        t.diagnostic(`${what}: after round ${round}: ${JSON.stringify(state)}`);
      }
      return Number.POSITIVE_INFINITY;
    };

    await connection.flushall();
    assert.equal((await disagreements()).missing, workerCount, 'FLUSHALL emptied the ledger');
    const afterFlush = await roundsToConverge('FLUSHALL');
    assert.ok(afterFlush <= maxRounds, `not converged ${maxRounds} rounds after FLUSHALL`);

    await redis.stop(true);
    await redis.start();
    await eventually('reconnected', 10_000, async () => ((await connection.ping().catch(() => undefined)) === 'PONG' ? true : undefined));
    const afterRestart = await roundsToConverge('restart');
    assert.ok(afterRestart <= maxRounds, `not converged ${maxRounds} rounds after a restart`);
    t.diagnostic(`converged after ${afterFlush} round(s) after FLUSHALL, ${afterRestart} after a restart`);
  },
);

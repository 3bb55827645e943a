/**
 * The ledger against a model, on a real Redis: fast-check strings together a small fleet's life
 * (2-3 workers of 1-4 slots, 1-2 balancers; reservations of both priorities, dispatches that run,
 * are refused, or end at a deadline or a client's cancel before or after the task started;
 * answers; releases by balancers and by workers that arrive, are lost or arrive twice; heartbeats
 * on time or overtaken by later releases; workers that die and start again under the same id with
 * other capacities; balancers that die with their batch; time passing; sweeps). The model knows
 * what every worker truly runs. After every call to Redis the ledger must hold what its contract
 * says (every worker's count, the totals, each reservation least-loaded and each release's
 * answer); at every checkpoint, and at the end of every run with tasks still running, the
 * bound in docs/ledger.md must have brought every live worker to free slots = capacity - what it runs.
 * The model is testkit/src/ledger-model/ (shared with the fault suite's long run).
 *
 * On the old answer-count repair (ed1ad6f; this model adapted to that heartbeat's running and
 * answered counts and its release kinds, and held to that code's own bound: a lost lease is
 * dropped at its worker's third heartbeat after it was reserved or answered) it found, shrunk to
 * 7 steps: a worker of 3 slots runs task L1 and answers it; the balancer's release of L1 never
 * goes out; the worker heartbeats; it runs and answers one more task, L3 (whose release has not
 * gone out yet either); two more heartbeats, and the ledger counts 2 in flight where the worker
 * runs nothing and only L3 may still be on its way back. The old heartbeat kept
 * min(answered - acked, answered - answered two heartbeats before) answers "coming back", so
 * while the worker kept answering, a lost release's slot never came back. Other seeds
 * shrank to the same flaw on the reservation side (5 steps): a lease reserved on a worker and
 * never dispatched (as when its balancer dies first), the worker heartbeats, one more task is
 * reserved there and runs, and two heartbeats later the lost lease is still counted: the old
 * count allowed the last two periods' reservations as "on their way" and could not tell which
 * had arrived.
 *
 * A failure prints the run's story, the seed and the path: set HEADROOM_LEDGER_MODEL_SEED and
 * HEADROOM_LEDGER_MODEL_PATH to replay it.
 */
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { testRedisUrl } from '@headroom/testkit';
import { Dispatch, Heartbeat, LedgerModel, ledgerModelAssertParameters, SendBatch, TaskEnds } from '@headroom/testkit/ledger-model';

/** About 6 s on this repository's 2-core VM under other runs' load; the fault suite's long run does many more. */
const numRuns = 40;

let model: LedgerModel;
before(async () => {
  model = await LedgerModel.open(testRedisUrl);
});
after(() => model?.close());

test(
  `the ledger keeps its contract at every step, and counts what each worker runs once the bound has passed (${numRuns} random runs)`,
  { timeout: 120_000 },
  async (t) => {
    await fc.assert(model.property(), ledgerModelAssertParameters(numRuns));
    t.diagnostic(`what the runs did: ${JSON.stringify(model.stats)}`);
  },
);

test("an answer whose release never goes out stops counting at the bound while its worker keeps answering: the old repair's counterexample, replayed", async () => {
  // Picks by index, as fast-check printed them: on w0 (3 slots), L1 runs and is answered; its
  // release stays in the balancer's batch for good; w0 heartbeats; L3 runs on w0 and is answered.
  await model.check({ capacities: [3, 1, 2], balancerCount: 1 }, [
    new SendBatch(0, [], ['user']),
    new Dispatch(0, 'worker-runs'),
    new TaskEnds(0, 'answered'),
    new Heartbeat(0, false),
    new SendBatch(0, [], ['user', 'user']),
    new Dispatch(7, 'worker-runs'),
    new TaskEnds(0, 'answered'),
  ]);
});

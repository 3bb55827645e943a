/**
 * The ledger's model-based test (fleet/test/ledger-model.test.ts, whose few seconds run with the
 * unit tests), long: many more runs, each up to three times as many steps, so that rarer
 * interleavings (a worker's own release lost after its balancer gave up, a heartbeat overtaken
 * by releases and then by a sweep, a restart with fewer slots than it had leases) come up too.
 * 200 runs take about 45 s on this repository's 2-core VM, within npm test's 15 minutes;
 * HEADROOM_LEDGER_MODEL_RUNS sets the number of runs (2,000 for a longer hunt: about 8 minutes).
 */
import { test } from 'node:test';
import fc from 'fast-check';
import { testRedisUrl } from '@headroom/testkit';
import { LedgerModel, ledgerModelAssertParameters } from '@headroom/testkit/ledger-model';

const numRuns = Number(process.env.HEADROOM_LEDGER_MODEL_RUNS ?? 200);
const maxCommands = 150;

test(`ledger model, long: ${numRuns} random runs of up to ${maxCommands} steps keep the contract and the bound`, { timeout: 20 * 60_000 }, async (t) => {
  const model = await LedgerModel.open(testRedisUrl);
  t.after(() => model.close());
  await fc.assert(model.property({ maxCommands }), ledgerModelAssertParameters(numRuns));
  t.diagnostic(`what the runs did: ${JSON.stringify(model.stats)}`);
});

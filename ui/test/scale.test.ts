/**
 * The UI at the scale the issue names: 200 workers (in the ledger, with their reports, as 200
 * worker processes would write them) and 20 integrations (10 minutes of latency histograms on
 * both clusters, recorded as workers record them). Every row and series shows; the charts take
 * new data in place instead of being built again; the main thread never stalls for long.
 * Timings are printed as diagnostics; only a gross stall fails.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { eventually, mapLimit } from '@headroom/testkit';
import { LatencyRecorder, WorkerReports } from '@headroom/fleet';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { goTo, openPage, signIn, unexpectedProblems } from '../node/browser';
import { operatorToken, startUiStack } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

const integrations = Array.from({ length: 20 }, (_, i) => `bank-${String(i + 1).padStart(2, '0')}`);
const workers = Array.from({ length: 200 }, (_, i) => ({
  workerId: `worker-${String(i).padStart(3, '0')}`,
  cluster: i < 120 ? 'baseline' : 'candidate',
  capacity: i < 120 ? 1 : 20,
}));
/** A main-thread task this long is a stall a person notices as a frozen page. */
const grossStallMs = 1000;

test('200 workers and 20 integrations: all shown, charts updated in place, no stall', { timeout: 180_000 }, async (t) => {
  const stack = await startUiStack(t, unleash, { integrations });
  const { redis, ledger, ledgerOptions } = stack.fleet;
  const keyPrefix = ledgerOptions.keyPrefix!;
  const reports = new WorkerReports(redis, keyPrefix);
  const beat = () =>
    mapLimit(workers, 20, async (worker, i) => {
      await ledger.heartbeat(worker.cluster, {
        workerId: worker.workerId,
        address: `127.0.0.1:${20_000 + i}`,
        capacity: worker.capacity,
        draining: false,
        heldLeaseIds: [],
      });
      const report = {
        atUnixMs: Date.now(),
        heapUsedBytes: 40e6 + i * 1e5,
        heapLimitBytes: 4 * 2 ** 30,
        gcTimeRatio: 0.01,
        eventLoopUtilization: 0.2,
        eventLoopDelayP99Ms: 20,
        latencyP50Ms: 120,
        latencyP99Ms: 400,
        tasksPerSecond: 3,
        errorsPerSecond: 0.1,
      };
      await reports.publish(worker.workerId, report, 10_000);
    });
  await beat();
  const beats = setInterval(() => void beat().catch(() => undefined), 1000);
  t.after(() => clearInterval(beats));

  // Ten minutes of history and, while the test runs, new slots as they complete.
  const recorders = {
    baseline: new LatencyRecorder(redis, { keyPrefix, cluster: 'baseline' }),
    candidate: new LatencyRecorder(redis, { keyPrefix, cluster: 'candidate' }),
  };
  const record = async (atUnixMs: number) => {
    integrations.forEach((integration, i) => {
      for (let sample = 0; sample < 5; sample++) {
        const baseMs = 100 + i * 10 + sample * 20;
        recorders.baseline.record(integration, baseMs, atUnixMs);
        recorders.candidate.record(integration, baseMs * (1 + i / 40), atUnixMs);
      }
    });
    await Promise.all([recorders.baseline.flush(), recorders.candidate.flush()]);
  };
  for (let ago = 600_000; ago >= 0; ago -= 10_000) await record(Date.now() - ago);
  const recording = setInterval(() => void record(Date.now()).catch(() => undefined), 1000);
  t.after(() => clearInterval(recording));

  const watched = await openPage(stack.browser);
  const { page } = watched;
  await page.addInitScript(() => {
    const seen: number[] = [];
    (window as unknown as { __longTasksMs: number[] }).__longTasksMs = seen;
    new PerformanceObserver((list) => list.getEntries().forEach((entry) => seen.push(entry.duration))).observe({ type: 'longtask', buffered: true });
  });
  let seriesAnswers = 0;
  page.on('response', (response) => void (response.url().includes('/api/v1/latency/series') && response.ok() && seriesAnswers++));
  await signIn(page, stack.baseUrl, operatorToken);

  const ratioLegend = page.locator('figure', { hasText: 'Latency ratio p50' }).locator('.u-legend .u-series');
  await eventually('20 integrations in the ratio chart', 15_000, async () => ((await ratioLegend.count()) === 21 ? true : undefined));
  const legendText = (await ratioLegend.allTextContents()).join(' ');
  for (const integration of integrations) assert.ok(legendText.includes(integration), `${integration} in the legend`);

  // The canvases, marked: after the series were fetched again they must be the same ones.
  await page.evaluate(() => document.querySelectorAll('.chart-plot canvas').forEach((canvas) => canvas.setAttribute('data-kept', 'yes')));
  const answersBefore = seriesAnswers;
  await eventually('the series fetched twice more', 15_000, () => (seriesAnswers >= answersBefore + 2 ? true : undefined));
  const canvases = await page.evaluate(() => [...document.querySelectorAll('.chart-plot canvas')].map((canvas) => canvas.getAttribute('data-kept')));
  // Six charts: each integration's p99 and errors, the two ratios, latency and throughput by cluster.
  assert.deepEqual(canvases, ['yes', 'yes', 'yes', 'yes', 'yes', 'yes'], 'the charts were updated in place, not built again');

  const startedAt = Date.now();
  await goTo(page, 'Workers');
  const rows = page.locator('.worker-table tbody tr');
  await eventually('200 rows', 15_000, async () => ((await rows.count()) === 200 ? true : undefined));
  t.diagnostic(`workers page: 200 rows ${Date.now() - startedAt} ms after the click`);
  assert.match((await rows.nth(199).textContent()) ?? '', /worker-199.*candidate.*0 \/ 20.*MiB/);
  // Two refreshes of the table (every 2 s) while it is shown.
  await page.waitForTimeout(4500);

  const longTasksMs = await page.evaluate(() => (window as unknown as { __longTasksMs: number[] }).__longTasksMs);
  const longest = Math.max(0, ...longTasksMs);
  t.diagnostic(
    `main-thread tasks over 50 ms: ${longTasksMs.length}, longest ${Math.round(longest)} ms, total ${Math.round(longTasksMs.reduce((a, b) => a + b, 0))} ms`,
  );
  assert.ok(longest < grossStallMs, `the longest main-thread task took ${Math.round(longest)} ms`);
  assert.deepEqual(unexpectedProblems(watched), []);
});

/**
 * The pages as an operator reads them during an incident, in a real Chromium: background tasks
 * queue beside a slot kept for user-present ones, latencies reach seconds. Each figure must say
 * what it counts, bars must agree with their numbers, and no page may overflow or show a
 * negative or missing number.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { LatencyRecorder, OverrideStore } from '@headroom/fleet';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { eventually } from '@headroom/testkit';
import { goTo, openPage, signIn, unexpectedProblems } from '../node/browser';
import { startUiStack, viewerToken } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

const pages = ['Overview', 'Traffic', 'Rollouts', 'Rollback', 'Parallelism', 'Workers', 'Audit'];
const clusterColoursRgb = ['rgb(91, 107, 130)', 'rgb(217, 115, 26)'];

test('during an incident: named queue figures, the slot kept for user-present tasks, whole axis labels, bars in step', { timeout: 180_000 }, async (t) => {
  const stack = await startUiStack(t, unleash);
  const { redis, ledger, ledgerOptions } = stack.fleet;
  const keyPrefix = ledgerOptions.keyPrefix!;
  // A worker of 5 slots running 4 tasks; a balancer waits for the cluster with 37 background tasks.
  const heldLeaseIds: string[] = [];
  const beatWorker = () =>
    ledger.heartbeat('baseline', { workerId: 'incident-w1', address: '127.0.0.1:1', capacity: 5, draining: false, heldLeaseIds, dispatchGraceMs: 120_000 });
  await beatWorker();
  for (let i = 0; i < 4; i++) {
    const reservation = await ledger.reserve('baseline', { priority: 'background', balancerId: 'incident-b1', waitIfNone: false });
    assert.ok(reservation.ok);
    heldLeaseIds.push(reservation.leaseId);
  }
  const overrides = new OverrideStore(redis, keyPrefix);
  const beat = () =>
    Promise.all([
      beatWorker(),
      ledger.stillWaiting('baseline', 'incident-b1', false),
      overrides.balancerHeartbeat('incident-b1', { address: '127.0.0.1:2', queued: { userPresent: 0, background: 37 }, trafficFlag: null }),
    ]);
  await beat();
  const beating = setInterval(() => void beat().catch(() => undefined), 200);
  t.after(() => clearInterval(beating));
  // Slow tasks: latencies of several seconds, whose axis labels ("8000 ms") are the widest.
  const recorders = ['baseline', 'candidate'].map((cluster) => new LatencyRecorder(redis, { keyPrefix, cluster }));
  for (let ago = 120_000; ago >= 0; ago -= 10_000) {
    for (const recorder of recorders) for (let sample = 0; sample < 20; sample++) recorder.record('bank-a', 1000 + sample * 400, Date.now() - ago);
  }
  await Promise.all(recorders.map((recorder) => recorder.flush()));

  const watched = await openPage(stack.browser);
  const { page } = watched;
  await signIn(page, stack.baseUrl, viewerToken);

  // The queue figure names both numbers, in colours that are not the clusters'.
  const queueRow = page.locator('.queue-row', { hasText: 'incident-b1' });
  await queueRow.locator('.queue-figures', { hasText: 'background 37' }).waitFor();
  assert.equal((await queueRow.locator('.queue-figures').textContent())?.replace(/\s+/g, ' ').trim(), 'user-present 0 · background 37');
  for (const bar of await queueRow.locator('.usage-bar-fill').all()) {
    const colour = await bar.evaluate((element) => getComputedStyle(element).backgroundColor);
    assert.ok(!clusterColoursRgb.includes(colour), `queue bar in a cluster colour: ${colour}`);
  }

  // The free slot says it is kept for user-present tasks, and why in its tooltip.
  const card = page.getByRole('region', { name: /baseline cluster/ });
  const free = card.locator('.stat', { has: page.locator('dt', { hasText: /^Free$/ }) });
  await free.locator('.stat-note', { hasText: 'kept for user-present' }).waitFor();
  assert.equal((await free.locator('dd').textContent())?.startsWith('1'), true);
  const note = free.locator('.stat-note');
  assert.ok(await note.evaluate((element) => element.scrollWidth <= element.clientWidth), 'the note is cut');
  assert.match((await free.getAttribute('title')) ?? '', /keeps a share of the capacity for user-present tasks \(--kept-for-user-present-share/);

  // Bars show their number at once: no easing on width.
  await card.locator('.bar-caption', { hasText: '4 of 5 slots in use' }).waitFor();
  const bar = card.locator('.usage-bar-fill').first();
  assert.equal(await bar.evaluate((element) => getComputedStyle(element).transitionDuration), '0s');
  const fillShare = await bar.evaluate((element) => element.getBoundingClientRect().width / element.parentElement!.getBoundingClientRect().width);
  assert.ok(Math.abs(fillShare - 0.8) < 0.01, `bar at ${fillShare} for 4 of 5`);

  // p50 and p95 of a cluster: one colour, a solid and a dashed swatch, as their lines.
  const chart = page.locator('figure', { hasText: 'Latency by cluster' });
  const marker = (label: string) => chart.locator('.u-legend .u-series', { hasText: label }).locator('.u-marker');
  await marker('baseline p95').waitFor();
  assert.equal(await marker('baseline p50').evaluate((element) => getComputedStyle(element).borderTopStyle), 'solid');
  assert.equal(await marker('baseline p95').evaluate((element) => getComputedStyle(element).borderTopStyle), 'dashed');
  // The y-axis labels are whole: nothing is drawn in the canvas's first pixels, where a clipped label would be cut.
  const inkInColumns = (widthPx: number) =>
    chart.locator('canvas').evaluate((canvas: HTMLCanvasElement, columns: number) => {
      const scale = canvas.width / canvas.getBoundingClientRect().width;
      const pixels = canvas.getContext('2d')!.getImageData(0, 0, Math.ceil(columns * scale), canvas.height).data;
      let ink = 0;
      for (let i = 3; i < pixels.length; i += 4) if (pixels[i]! > 0) ink++;
      return ink;
    }, widthPx);
  const plotLeftPx = () =>
    chart.locator('.u-over').evaluate((element) => element.getBoundingClientRect().left - element.closest('.uplot')!.getBoundingClientRect().left);
  // Drawn: the axis labels are on the canvas, left of the plot.
  await eventually('the y-axis labels drawn', 15_000, async () => ((await inkInColumns((await plotLeftPx()) - 1)) > 0 ? true : undefined));
  assert.equal(await inkInColumns(2), 0, 'a y-axis label reaches the canvas edge: it is clipped');

  if (process.env.HEADROOM_SCREENSHOT_DIR) await page.screenshot({ path: `${process.env.HEADROOM_SCREENSHOT_DIR}/incident-overview.png`, fullPage: true });
  // Every page, during the incident: nothing wider than the window, no negative or missing number.
  for (const title of pages) {
    await goTo(page, title);
    const overflowPx = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflowPx <= 0, `${title} is ${overflowPx} px wider than the window`);
    const text = (await page.locator('main').textContent()) ?? '';
    assert.doesNotMatch(text, /NaN|undefined|Infinity|(^|[\s(])-\d/, `${title} shows a broken number`);
  }
  assert.deepEqual(unexpectedProblems(watched), []);
  await page.context().close();
});

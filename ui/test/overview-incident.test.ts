/**
 * The Overview as an operator reads it during an incident, in a real Chromium: a balancer with
 * background tasks piling up while its cluster shows a free slot, and the latency of both
 * clusters. Each figure says what it counts, in colours that do not reuse the clusters' for
 * another meaning; why background tasks wait beside a free slot is said; bars and figures agree
 * at once; a dashed line has a dashed swatch.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { LatencyRecorder, OverrideStore } from '@headroom/fleet';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { openPage, signIn, unexpectedProblems } from '../node/browser';
import { startUiStack, viewerToken } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

test('during an incident the Overview says what each queue figure counts, why background tasks wait beside a free slot, and draws its legend as its lines', { timeout: 120_000 }, async (t) => {
  const stack = await startUiStack(t, unleash);
  const { redis, ledger, ledgerOptions } = stack.fleet;
  const keyPrefix = ledgerOptions.keyPrefix!;
  const overrides = new OverrideStore(redis, keyPrefix);
  const heartbeat = () =>
    Promise.all([
      ledger.heartbeat('baseline', { workerId: 'slow-bank-w1', address: '127.0.0.1:1', capacity: 10, draining: false, heldLeaseIds: [] }),
      overrides.balancerHeartbeat('balancer-a', { address: '127.0.0.1:2', queued: { userPresent: 0, background: 37 }, trafficFlag: null }),
    ]);
  await heartbeat();
  const heartbeats = setInterval(() => void heartbeat().catch(() => undefined), 200);
  t.after(() => clearInterval(heartbeats));
  // Two minutes of a slow bank on both clusters: a p95 near a second.
  const recorders = [new LatencyRecorder(redis, { keyPrefix, cluster: 'baseline' }), new LatencyRecorder(redis, { keyPrefix, cluster: 'candidate' })];
  for (let ago = 120_000; ago >= 0; ago -= 10_000) {
    for (const recorder of recorders) for (let sample = 0; sample < 20; sample++) recorder.record('bank-a', 200 + sample * 45, Date.now() - ago);
  }
  await Promise.all(recorders.map((recorder) => recorder.flush()));

  const watched = await openPage(stack.browser);
  const { page } = watched;
  await signIn(page, stack.baseUrl, viewerToken);

  const row = page.locator('.queue-row', { hasText: 'balancer-a' });
  await row.locator('.queue-figures').waitFor();
  assert.equal((await row.locator('.queue-figures').textContent())?.trim(), 'user-present 0 · background 37', 'both figures are named, not "0 / 37"');
  const fillColour = (selector: string) => page.locator(selector).first().locator('.usage-bar-fill').evaluate((element) => getComputedStyle(element).backgroundColor);
  const queueColours = [await fillColour('.queue-row .usage-bar.tone-user-present'), await fillColour('.queue-row .usage-bar.tone-background')];
  const clusterColours = [await fillColour('.cluster-card.tone-baseline .usage-bar'), await fillColour('.cluster-card.tone-candidate .usage-bar')];
  assert.equal(new Set([...queueColours, ...clusterColours]).size, 4, `priorities and clusters have colours of their own: ${JSON.stringify({ queueColours, clusterColours })}`);
  assert.match((await page.locator('.kept-note').textContent()) ?? '', /kept for user-present tasks/, 'why background tasks wait while slots are free');
  const free = page.locator('.cluster-card.tone-baseline .stat', { has: page.locator('dt', { hasText: /^Free$/ }) });
  assert.match((await free.getAttribute('title')) ?? '', /kept for user-present tasks/);
  const transition = await page.locator('.usage-bar-fill').first().evaluate((element) => getComputedStyle(element).transitionDuration);
  assert.equal(transition, '0s', 'a bar shows its figure at once');

  const chart = page.locator('.chart', { hasText: 'Latency by cluster' });
  const marker = (label: string) => chart.locator('.u-legend .u-series', { hasText: label }).locator('.u-marker').evaluate((element) => getComputedStyle(element).borderTopStyle);
  await chart.locator('.u-legend').waitFor();
  assert.equal(await marker('baseline p50'), 'solid');
  assert.equal(await marker('baseline p95'), 'dashed', 'p95 is drawn dashed: so is its swatch');
  assert.deepEqual(unexpectedProblems(watched), []);
  await page.context().close();
});

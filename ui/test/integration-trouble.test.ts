/**
 * A bank slow for both clusters, in a real Chromium: the candidate/baseline ratio stays near 1,
 * so the Overview must name the bank from its own recent past, with the figure that makes it so.
 * And when the clusters run different integrations, the cluster chart says so.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { LatencyRecorder } from '@headroom/fleet';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { eventually } from '@headroom/testkit';
import { openPage, signIn, unexpectedProblems } from '../node/browser';
import { startUiStack, viewerToken } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

test('one bank slow on both clusters is named with its figure while the ratio stays near 1; different mixes are said', { timeout: 180_000 }, async (t) => {
  const stack = await startUiStack(t, unleash);
  const { redis, ledgerOptions } = stack.fleet;
  const keyPrefix = ledgerOptions.keyPrefix!;
  const recorders = {
    baseline: new LatencyRecorder(redis, { keyPrefix, cluster: 'baseline' }),
    candidate: new LatencyRecorder(redis, { keyPrefix, cluster: 'candidate' }),
  };
  const both = [recorders.baseline, recorders.candidate];
  // Eleven quiet minutes: bank-a and bank-c answer in about 400 ms on both clusters; bank-b runs on the baseline only.
  const seededAtMs = Date.now();
  for (let ago = 660_000; ago > 75_000; ago -= 5000) {
    for (const recorder of both)
      for (let sample = 0; sample < 5; sample++) {
        recorder.record('bank-a', 300 + sample * 40, seededAtMs - ago);
        recorder.record('bank-c', 300 + sample * 40, seededAtMs - ago);
      }
    for (let sample = 0; sample < 5; sample++) recorders.baseline.record('bank-b', 50 + sample * 10, seededAtMs - ago);
  }
  // Then bank-c slows to about 4 s on both clusters, and stays slow while the test runs.
  const slowFrom = (fromMs: number, toMs: number) => {
    for (let at = fromMs; at <= toMs; at += 1000)
      for (const recorder of both) {
        recorder.record('bank-a', 400, at);
        recorder.record('bank-c', 3500 + (at % 3) * 300, at);
      }
  };
  slowFrom(seededAtMs - 75_000, seededAtMs);
  await Promise.all(both.map((recorder) => recorder.flush()));
  let fedUntilMs = seededAtMs;
  const feed = async () => {
    const now = Date.now();
    slowFrom(fedUntilMs + 1000, now);
    fedUntilMs = Math.max(fedUntilMs, now - 1000);
    await Promise.all(both.map((recorder) => recorder.flush()));
  };
  const feeding = setInterval(() => void feed().catch(() => undefined), 1000);
  t.after(() => clearInterval(feeding));

  // The ratio of bank-c stays near 1: both clusters are equally slow.
  const latency = await stack.api('GET', '/latency?window=1m');
  const bankC = (latency.body as { integrations: { integration: string; ratio: { p99: number } | null }[] }).integrations.find(
    (item) => item.integration === 'bank-c',
  );
  assert.ok(bankC?.ratio && bankC.ratio.p99 > 0.8 && bankC.ratio.p99 < 1.25, `bank-c ratio ${JSON.stringify(bankC?.ratio)}`);

  const watched = await openPage(stack.browser);
  const { page } = watched;
  await signIn(page, stack.baseUrl, viewerToken);
  const section = page.getByRole('region', { name: 'Integrations against their own recent past' });
  const trouble = section.locator('.trouble-list li');
  await trouble.first().waitFor();
  assert.deepEqual(await trouble.allTextContents().then((texts) => texts.length), 1, 'only bank-c is in trouble');
  assert.match((await trouble.first().textContent()) ?? '', /^bank-c p99 [34]\.\d s, (\d+\.\d)x its previous 10 min \((3\d\d|4\d\d) ms\)$/);
  const ratio = Number(/, (\d+\.\d)x/.exec((await trouble.first().textContent()) ?? '')?.[1]);
  assert.ok(ratio >= 7 && ratio <= 14, `bank-c at ${ratio}x its own baseline`);
  // The row is marked in words, not colour alone; the others are ok.
  const row = (name: string) => section.locator('tr', { has: page.locator('th', { hasText: name }) });
  assert.equal(await row('bank-c').locator('.tag').textContent(), '⚠ in trouble');
  assert.equal(await row('bank-a').locator('.tag').textContent(), 'ok');
  assert.equal(await section.locator('figure', { hasText: 'p99 by integration' }).count(), 1);
  // Prometheus gets the verdict; the latencies themselves it has from the workers.
  const metrics = await (await fetch(`${stack.baseUrl}/api/v1/metrics`)).text();
  assert.match(metrics, /^headroom_control_integration_in_trouble\{integration="bank-c"\} 1$/m);
  assert.match(metrics, /^headroom_control_integration_in_trouble\{integration="bank-a"\} 0$/m);
  assert.match(metrics, /^headroom_control_integration_p99_vs_own_baseline_ratio\{integration="bank-c"\} (7|8|9|1[0-4])(\.\d+)?$/m);
  assert.doesNotMatch(metrics, /headroom_control_integration_in_trouble\{integration="bank-b"\}/, 'too few tasks: no verdict, no series');

  // The cluster chart compares bank-a and bank-c only, and says why.
  const mixNote = page.locator('.mix-note');
  await mixNote.waitFor();
  assert.equal(
    (await mixNote.textContent())?.trim(),
    "The clusters' integration mixes differ: only the baseline ran bank-b. The latency chart compares bank-a, bank-c only, the candidate weighted to the baseline's mix. Tasks and errors count every integration.",
  );
  // Like with like: over the same integrations, the clusters' p50 are the same.
  await eventually('same-mix figures in the series', 15_000, async () => {
    const series = await stack.api('GET', '/latency/series?window=2m');
    const slots = (series.body as { slots: { sameMix: { baselineP50Ms: number | null; candidateP50Ms: number | null } }[] }).slots;
    const last = slots.at(-1)?.sameMix;
    return last && last.baselineP50Ms !== null && last.baselineP50Ms === last.candidateP50Ms ? true : undefined;
  });
  if (process.env.HEADROOM_SCREENSHOT_DIR) await page.screenshot({ path: `${process.env.HEADROOM_SCREENSHOT_DIR}/integration-trouble.png`, fullPage: true });
  assert.deepEqual(unexpectedProblems(watched), []);
  await page.context().close();
});

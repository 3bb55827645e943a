/**
 * The Rollouts page in a real Chromium, on a real stack under light load: a rollout started
 * through the API shows its steps, its current step, each gate against its line and its
 * decisions as the autopilot advances; the overview shows it; an operator pauses, resumes and
 * aborts it; a viewer sees all of it with every button disabled; a bad plan in the form shows
 * each field problem. (docs/screenshots/rollouts.png comes from the demo: ui/scripts/screenshots.ts.)
 */
import { after, before, test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Page } from 'playwright-core';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { json, submit, task } from '@headroom/testkit';
import { goTo, openPage, signIn, unexpectedProblems } from '../node/browser';
import { operatorToken, startUiStack, viewerToken, type UiStack } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

/** The autopilot acts every 250 ms and reads latency 1 s after a window ends (workers report every 500 ms here). */
const controlPlaneOptions = { autopilotTickMs: 250, autopilotLeaseMs: 2000, latencySettleMs: 1000 };

/** Short windows and holds; lines the in-process fleet (sharing its event loop with Chromium's driver) does not trip. */
const plan = {
  name: 'ui-rollout',
  integrations: ['bank-a', 'bank-b'],
  windowSeconds: 10,
  holdSeconds: 10,
  minSamples: 10,
  gates: { p50Ratio: 3, p95Ratio: 6, gcShare: 0.9, eventLoopUtilization: 1, eventLoopDelayP99Ms: 5000, heapShare: 0.95 },
  steps: [
    { candidatePercent: 20, maxParallelism: 4 },
    { candidatePercent: 50, search: { from: 4, factor: 2, max: 8 } },
    { candidatePercent: 100, maxParallelism: 8 },
  ],
};

/**
 * One worker per cluster (following the parallelism flag), a balancer routing by the traffic
 * flag, and an open loop of 25 tasks a second (20 ms each, bank-a and bank-b in turn, at most
 * 32 in flight) until `stop`.
 */
async function fleetUnderLightLoad(stack: UiStack): Promise<{ stop(): Promise<void> }> {
  const { fleet } = stack;
  const handler = async (_task: unknown, signal: AbortSignal) => void (await sleep(20, undefined, { signal }));
  for (const cluster of ['baseline', 'candidate']) {
    const { flags } = await stack.newFlagClient();
    await fleet.addWorker(
      { cluster, workerId: `${cluster}-1`, maxParallelism: 8, latencyReportIntervalMs: 500, reportIntervalMs: 500 },
      { 'bank-a': handler, 'bank-b': handler },
      flags,
    );
  }
  const { flags } = await stack.newFlagClient();
  await fleet.addBalancer({}, flags);
  const inFlight = new Set<Promise<unknown>>();
  let sent = 0;
  const timer = setInterval(() => {
    if (inFlight.size >= 32) return;
    sent++;
    const call = submit(
      fleet.clients[0]!,
      task({ integration: sent % 2 === 0 ? 'bank-a' : 'bank-b', key: `key-${sent}`, priority: 'BACKGROUND', payload: json({}) }),
      5000,
    );
    inFlight.add(call);
    void call.finally(() => inFlight.delete(call));
  }, 40);
  let stopped: Promise<void> | undefined;
  return {
    stop() {
      clearInterval(timer);
      stopped ??= Promise.all(inFlight).then(() => undefined);
      return stopped;
    },
  };
}

const gateTable = (page: Page, subject: string) => page.locator('.gate-table').filter({ has: page.locator('caption', { hasText: subject }) });
const gateRow = (page: Page, subject: string, gate: string) =>
  gateTable(page, subject)
    .locator('tbody tr')
    .filter({ has: page.locator('th', { hasText: gate }) });
const rolloutState = (page: Page) => page.getByRole('region', { name: 'Rollout state' });

test('the Rollouts page follows a rollout the autopilot drives; pause, resume, abort; a viewer; a bad plan', { timeout: 300_000 }, async (t: TestContext) => {
  const stack = await startUiStack(t, unleash, controlPlaneOptions);
  const load = await fleetUnderLightLoad(stack);
  t.after(() => load.stop());
  const started = await stack.api('POST', '/rollouts', plan);
  assert.equal(started.status, 201, JSON.stringify(started.body));
  const id = started.body.id as string;

  const operator = await openPage(stack.browser);
  const { page } = operator;
  await signIn(page, stack.baseUrl, operatorToken);

  await t.test('the overview shows the active rollout, with a link to its page', async () => {
    const banner = page.getByRole('region', { name: 'Active rollout' });
    await banner.waitFor();
    const text = (await banner.textContent()) ?? '';
    assert.match(text, /ui-rollout/);
    assert.match(text, /Step 1 of 3: 20% on the candidate at max parallelism 4/);
    assert.match(text, /running/);
    await banner.getByRole('link', { name: 'Open the Rollouts page' }).click();
    await page.getByRole('heading', { name: 'Rollouts', level: 1 }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/rollouts');
  });

  await t.test('the steps, the current one, the gates against their lines, and the decisions as the autopilot advances', async () => {
    const steps = page.getByRole('list', { name: 'Plan steps' }).getByRole('listitem');
    // The heading shows before the rollout's steps arrive (a CI run counted 0): count once they did.
    await steps.nth(2).waitFor();
    assert.equal(await steps.count(), 3);
    assert.match((await steps.nth(0).textContent()) ?? '', /Step 1current20% on the candidatemax parallelism 4hold 10 s/);
    assert.match((await steps.nth(1).textContent()) ?? '', /Step 2to come50% on the candidatesearch max parallelism 4 → 8, ×2 a raisehold 10 s/);
    assert.match((await steps.nth(2).textContent()) ?? '', /Step 3to come100% on the candidatemax parallelism 8/);
    assert.match((await rolloutState(page).textContent()) ?? '', /Step 1 of 3: 20% of bank-a, bank-b on the candidate, max parallelism 4 now/);
    await rolloutState(page).getByText('Waiting for:').waitFor();

    // Figures once each cluster ran minSamples tasks of an integration in the window; each with its line.
    const p50 = gateRow(page, 'bank-a', 'p50 ratio');
    await p50.locator('.gate-status', { hasText: /^. (ok|close)$/ }).waitFor({ timeout: 30_000 });
    const p50Cells = await p50.locator('td').allTextContents();
    assert.match(p50Cells[0]!, /^\d+\.\d\d×$/, 'the value, as a ratio');
    assert.equal(p50Cells[1], '≤ 3.00×', 'against its line');
    assert.match((await gateRow(page, 'bank-b', 'p95 ratio').locator('td').nth(1).textContent()) ?? '', /≤ 6\.00×/);
    assert.match(
      (await gateRow(page, 'bank-a', 'Error rate increase').locator('td').nth(1).textContent()) ?? '',
      /≤ 1\.00%/,
      'a default line the plan did not set',
    );
    assert.match((await gateTable(page, 'bank-a').locator('caption').textContent()) ?? '', /\d+ tasks on the baseline, \d+ on the candidate/);
    const gc = gateRow(page, 'Candidate workers', 'GC share');
    assert.equal(await gc.locator('td').nth(1).textContent(), '≤ 90.0%');
    assert.match((await gc.locator('.gate-status').textContent()) ?? '', /ok|close|not enough data/);
    // Status is text with a mark, not colour alone.
    assert.match((await p50.locator('.gate-status').textContent()) ?? '', /^[✓▲] (ok|close)$/);

    const decisions = page.locator('.decision-log tbody tr');
    // The oldest at the bottom; the autopilot may have noted a hold (a gate close to its line) above it.
    await decisions.last().waitFor();
    assert.match((await decisions.last().textContent()) ?? '', /start.*olga.*started by olga; step 1 of 3/);
    // The autopilot takes step 2 once every gate held for a whole hold (10 s) on a whole window (10 s) of step 1.
    await page.getByRole('list', { name: 'Plan steps' }).locator('li[aria-current="step"]', { hasText: 'Step 2' }).waitFor({ timeout: 90_000 });
    const rows = await decisions.allTextContents();
    const stepRow = rows.findIndex((row) =>
      /step.*autopilot.*step 2 of 3: 50% of the plan's integrations on the candidate at max parallelism 4 \(searching up to 8\)/.test(row),
    );
    assert.ok(stepRow >= 0 && stepRow < rows.length - 1, `the step above the start, newest first: ${JSON.stringify(rows)}`);
    assert.match((await steps.nth(0).textContent()) ?? '', /Step 1done/);
    assert.match((await steps.nth(1).textContent()) ?? '', /Step 2current.*trying 4 now; highest held none yet/);
    // Gate figures again in step 2, and what the autopilot waits for now.
    await p50.locator('.gate-status', { hasText: /^. (ok|close)$/ }).waitFor({ timeout: 30_000 });
    await rolloutState(page)
      .locator('.waiting-for', { hasText: /first whole window|to hold for|to stay within its line|enough data/ })
      .waitFor();
    assert.deepEqual(unexpectedProblems(operator), []);
  });

  await t.test('a viewer sees everything with every button disabled, and why; the page fits a narrow window', async () => {
    const watched = await openPage(stack.browser, { widthPx: 420, heightPx: 900 });
    const viewerPage = watched.page;
    await signIn(viewerPage, stack.baseUrl, viewerToken);
    await viewerPage.getByRole('region', { name: 'Active rollout' }).waitFor();
    await goTo(viewerPage, 'Rollouts');
    const why = "You are signed in as victor, a viewer: changes need an operator's token.";
    await viewerPage.getByRole('note').filter({ hasText: why }).waitFor();
    // The note can show before the rollout's steps arrive (a CI run counted 0): count once they did.
    const steps = viewerPage.getByRole('list', { name: 'Plan steps' }).getByRole('listitem');
    await steps.nth(2).waitFor();
    assert.equal(await steps.count(), 3);
    await gateRow(viewerPage, 'bank-a', 'p50 ratio').waitFor();
    await viewerPage.locator('.decision-log tbody tr').nth(1).waitFor();
    const pause = viewerPage.getByRole('button', { name: 'Pause' });
    assert.equal(await pause.isDisabled(), true);
    assert.equal(await pause.getAttribute('title'), why);
    assert.equal(await viewerPage.getByLabel('Reason (for the audit log)').isDisabled(), true);
    const buttons = viewerPage.locator('main button:visible');
    assert.ok((await buttons.count()) >= 2);
    for (const button of await buttons.all()) assert.equal(await button.isDisabled(), true, `${await button.textContent()} is disabled`);
    const overflow = await viewerPage.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `the page is ${overflow} px wider than the window`);
    assert.deepEqual(unexpectedProblems(watched), []);
    await viewerPage.context().close();
  });

  await t.test('pause turns the button to Resume; resume; abort after a confirmation; the rollout moves to the finished ones', async () => {
    await page.getByLabel('Reason (for the audit log)').fill('checking bank-b by hand');
    await page.getByRole('button', { name: 'Pause' }).click();
    await rolloutState(page).locator('.rollout-status', { hasText: 'paused' }).waitFor();
    await page.getByRole('button', { name: 'Resume' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Pause' }).count(), 0);
    assert.match((await page.locator('.decision-log tbody tr').first().textContent()) ?? '', /pause.*olga.*checking bank-b by hand/);
    assert.equal((await stack.api('GET', `/rollouts/${id}`)).body.status, 'paused');
    assert.equal(await page.getByLabel('Reason (for the audit log)').inputValue(), '', 'a reason belongs to one change');

    await page.getByRole('button', { name: 'Resume' }).click();
    await rolloutState(page).locator('.rollout-status', { hasText: 'running' }).waitFor();
    await page.getByRole('button', { name: 'Pause' }).waitFor();

    await page.getByLabel('Reason (for the audit log)').fill('enough for today');
    await page.getByRole('button', { name: 'Abort…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Abort this rollout?' });
    await dialog.waitFor();
    assert.match((await dialog.textContent()) ?? '', /ui-rollout ends at step \d of 3.*Reason: enough for today/);
    await dialog.getByRole('button', { name: 'Abort rollout' }).click();
    await rolloutState(page).locator('.rollout-status', { hasText: 'aborted' }).waitFor();
    await page.getByRole('heading', { name: 'Latest rollout' }).waitFor();
    assert.equal(await page.getByRole('button', { name: /^(Pause|Resume|Abort…)$/ }).count(), 0, 'nothing left to control');
    const finished = page.locator('.rollout-history tbody tr').filter({ hasText: id });
    await finished.waitFor();
    assert.match((await finished.textContent()) ?? '', /ui-rollout.*aborted.*step \d of 3.*enough for today/);
    const rollout = (await stack.api('GET', `/rollouts/${id}`)).body;
    assert.equal(rollout.status, 'aborted');
    assert.deepEqual(
      rollout.decisions.filter((d: { actor: string }) => d.actor === 'olga').map((d: { kind: string; message: string }) => [d.kind, d.message]),
      [
        ['start', rollout.decisions[0].message],
        ['pause', 'checking bank-b by hand'],
        ['resume', 'resumed by olga'],
        ['abort', 'enough for today'],
      ],
    );
    assert.deepEqual(unexpectedProblems(operator), []);
  });

  await t.test('a bad plan in the form shows each field problem next to it and starts nothing; a good one starts', async () => {
    const editor = page.getByLabel('Plan (JSON)');
    await editor.waitFor();
    const example = JSON.parse(await editor.inputValue()) as { integrations: string[] };
    assert.deepEqual(example.integrations, ['bank-a', 'bank-b'], 'the example names the configured integrations');

    await editor.fill('{ "name": ');
    await page.getByRole('button', { name: 'Review and start…' }).click();
    const problems = page.getByRole('list', { name: 'Problems in the plan' });
    await problems.waitFor();
    assert.match((await page.locator('.plan-problems').textContent()) ?? '', /not valid JSON; nothing was sent/);

    await editor.fill(
      JSON.stringify({
        ...plan,
        windowSeconds: 5,
        surprise: true,
        steps: [
          { candidatePercent: 150, maxParallelism: 2 },
          { candidatePercent: 10, search: { from: 8, max: 4 } },
        ],
      }),
    );
    await page.getByRole('button', { name: 'Review and start…' }).click();
    await page.getByRole('dialog', { name: 'Start this rollout?' }).getByRole('button', { name: 'Start rollout' }).click();
    await page.locator('.plan-problems', { hasText: 'HTTP 400' }).waitFor();
    const listed = await problems.getByRole('listitem').allTextContents();
    const expected: Array<[string, RegExp]> = [
      ['windowSeconds', /from 10 to 3600/],
      ['surprise', /unknown field/],
      ['steps[0].candidatePercent', /from 0 to 100/],
      ['steps[1].search.max', /max >= from/],
    ];
    for (const [field, message] of expected) {
      const item = listed.find((text) => text.startsWith(`${field}: `));
      assert.ok(item, `${field} is named: ${JSON.stringify(listed)}`);
      assert.match(item, message);
    }
    assert.equal(await editor.getAttribute('aria-invalid'), 'true');
    assert.equal((await stack.api('GET', '/rollouts')).body.current.id, id, 'nothing was started');

    await editor.fill(JSON.stringify({ ...plan, name: 'from-the-form' }));
    await page.getByRole('button', { name: 'Review and start…' }).click();
    await page.getByRole('dialog', { name: 'Start this rollout?' }).getByRole('button', { name: 'Start rollout' }).click();
    await page.getByRole('heading', { name: 'Current rollout' }).waitFor();
    assert.match((await rolloutState(page).textContent()) ?? '', /from-the-form.*running/);
    assert.equal((await stack.api('GET', '/rollouts')).body.current.plan.name, 'from-the-form');
    assert.deepEqual(unexpectedProblems(operator), []);
  });

  await load.stop();
  await page.context().close();
});

/**
 * The Limits page in a real Chromium against the real control plane: an operator sets a limit
 * and the table shows it (and the ledger enforces it), a bad value shows the API's error and
 * changes nothing, a removal brings the default back; a balancer holding an integration at its
 * limit shows in the integration's chart; a viewer sees the table without controls.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { eventually, json, submit, task } from '@headroom/testkit';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { goTo, openPage, signIn, unexpectedProblems } from '../node/browser';
import { operatorToken, startUiStack, viewerToken } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

test('an operator sets and removes a limit on the Limits page; a bad value changes nothing; a viewer cannot change', { timeout: 240_000 }, async (t) => {
  // The limits series sampled often and charted soon after a slot ends, so that a chart fills quickly.
  const stack = await startUiStack(t, unleash, { limitSeriesSampleMs: 250, latencySettleMs: 500 });
  await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 10 });
  await stack.fleet.addWorker({ cluster: 'candidate', maxParallelism: 4 });
  const ownLimit = async () => (await stack.fleet.ledger.integrationLimits('baseline')).find((s) => s.integration === 'bank-a')?.limit ?? null;
  const watched = await openPage(stack.browser);
  const { page } = watched;
  await signIn(page, stack.baseUrl, operatorToken);
  await goTo(page, 'Limits');
  const setting = page.getByTestId('limit-baseline-bank-a-setting');
  const max = page.getByTestId('limit-baseline-bank-a-max');
  await eventually('the default of 10 slots shows', 10_000, async () => ((await max.textContent()) === '8' ? true : undefined));
  assert.match((await setting.textContent()) ?? '', /^default \(50% of capacity\)$/);

  await t.test('setting a count shows in the table and at the ledger, with its reason in the audit', async () => {
    const row = page.getByTestId('limit-baseline-bank-a');
    await row.getByLabel('Limit for bank-a', { exact: true }).fill('3');
    await row.getByLabel('Reason for bank-a', { exact: true }).fill('bank-a is slow');
    await row.getByRole('button', { name: 'Set' }).click();
    await page.getByRole('status').filter({ hasText: 'Set bank-a on baseline to 3 in flight' }).waitFor();
    assert.equal(await setting.textContent(), '3 in flight');
    assert.equal(await max.textContent(), '3');
    assert.deepEqual(await ownLimit(), { maxInFlight: 3 });
    const [entry] = (await stack.api('GET', '/audit?action=limit.set')).body.entries as { reason: string; actor: string }[];
    assert.deepEqual({ reason: entry?.reason, actor: entry?.actor }, { reason: 'bank-a is slow', actor: 'olga' });
  });

  await t.test('a bad value shows the error in the API’s words and changes nothing', async () => {
    const row = page.getByTestId('limit-baseline-bank-a');
    await row.getByLabel('Limit for bank-a', { exact: true }).fill('11');
    await row.getByRole('button', { name: 'Set' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'Changing a limit' });
    await alert.waitFor();
    const text = (await alert.textContent()) ?? '';
    assert.match(text, /HTTP 400 \(HR_ERR_INVALID_REQUEST\)/);
    assert.match(text, /body\.limit\.maxInFlight: got 11, above the capacity of cluster baseline \(10 slots\)/);
    assert.deepEqual(await ownLimit(), { maxInFlight: 3 });
    assert.equal(await setting.textContent(), '3 in flight');

    await row.getByLabel('Kind of limit for bank-a').selectOption('shareOfCapacity');
    await row.getByLabel('Limit for bank-a', { exact: true }).fill('1.5');
    await row.getByRole('button', { name: 'Set' }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: /body\.limit\.shareOfCapacity: got 1\.5/ })
      .waitFor();
    assert.deepEqual(await ownLimit(), { maxInFlight: 3 });
    assert.equal((await stack.api('GET', '/audit?action=limit.set')).body.entries.length, 1);
  });

  await t.test('a start rate is set beside the count, and alone over the default in flight; a bad rate shows the API’s error and changes nothing', async () => {
    const row = page.getByTestId('limit-baseline-bank-a');
    const rate = page.getByTestId('limit-baseline-bank-a-rate');
    assert.equal(await rate.textContent(), '—');
    await row.getByLabel('Kind of limit for bank-a').selectOption('maxInFlight');
    await row.getByLabel('Limit for bank-a', { exact: true }).fill('4');
    await row.getByLabel('Starts per second for bank-a', { exact: true }).fill('1000');
    await row.getByRole('button', { name: 'Set' }).click();
    await page.getByRole('status').filter({ hasText: 'Set bank-a on baseline to 4 in flight, at most 1,000/s starts' }).waitFor();
    assert.equal(await setting.textContent(), '4 in flight, at most 1,000/s starts');
    assert.equal(await rate.textContent(), '1,000/s');
    assert.deepEqual(await ownLimit(), { maxInFlight: 4, maxStartsPerSecond: 1000 });

    await row.getByLabel('Starts per second for bank-a', { exact: true }).fill('-5');
    await row.getByRole('button', { name: 'Set' }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: /body\.limit\.maxStartsPerSecond: got -5/ })
      .waitFor();
    assert.deepEqual(await ownLimit(), { maxInFlight: 4, maxStartsPerSecond: 1000 });

    await row.getByLabel('Kind of limit for bank-a').selectOption('default');
    await row.getByLabel('Starts per second for bank-a', { exact: true }).fill('2.5');
    await row.getByRole('button', { name: 'Set' }).click();
    await page.getByRole('status').filter({ hasText: 'Set bank-a on baseline to default in flight, at most 2.5/s starts' }).waitFor();
    assert.equal(await max.textContent(), '8', 'the default in flight');
    assert.equal(await rate.textContent(), '2.5/s');
    assert.deepEqual(await ownLimit(), { maxStartsPerSecond: 2.5 });
    const [entry] = (await stack.api('GET', '/audit?action=limit.set')).body.entries as { after: unknown }[];
    assert.deepEqual(entry?.after, { maxStartsPerSecond: 2.5 });
  });

  await t.test('removing the limit brings the default back', async () => {
    await page.getByTestId('limit-baseline-bank-a').getByRole('button', { name: 'Remove' }).click();
    await page.getByRole('status').filter({ hasText: 'Removed the limit of bank-a on baseline' }).waitFor();
    assert.equal(await max.textContent(), '8');
    assert.equal(await ownLimit(), null);
    assert.deepEqual(unexpectedProblems(watched), []);
  });

  await t.test('a balancer holding bank-a at its limit shows in its chart: limit, in flight, waiting, refused and run time', async () => {
    // Two tasks of one integration may wait on this balancer at its limit (half of 4); more are refused.
    await stack.fleet.addBalancer({ maxQueuedTasks: 4, maxQueuedShareAtLimit: 0.5, balancerHeartbeatIntervalMs: 250 });
    assert.equal((await stack.api('PUT', '/limits/baseline/bank-a', { limit: { maxInFlight: 1 } })).status, 200);
    // A limit of its own opens the chart on its own.
    const chart = page.getByTestId('limit-chart-baseline-bank-a');
    await chart.waitFor();
    assert.equal(await page.getByRole('button', { name: 'Chart of bank-a' }).first().getAttribute('aria-expanded'), 'true');
    const answers = Array.from({ length: 6 }, () => submit(stack.fleet.clients[0]!, task({ integration: 'bank-a', payload: json({ sleepMs: 3000 }) }), 60_000));
    const summary = page.getByTestId('limit-chart-baseline-bank-a-summary');
    await eventually('the chart summary to show the fleet at the limit', 60_000, async () =>
      /peak in flight 1 \(limit 1\), peak waiting 2, refused 3$/.test((await summary.textContent()) ?? '') ? true : undefined,
    );
    const codes = (await Promise.all(answers)).map((answer) => (answer.ok ? 'ok' : answer.code));
    assert.deepEqual(codes.filter((code) => code === 'ok').length, 3, JSON.stringify(codes));
    const points = (title: string) => chart.locator('figure', { hasText: title }).getAttribute('data-points');
    assert.ok(Number(await points('bank-a on baseline: tasks')) > 0);
    // The three tasks ran 3 s each (long enough for samples to see two waiting): their run time reaches the second chart once the worker reports it.
    await eventually('the run time charted', 60_000, async () => (Number(await points('bank-a on baseline: run time')) > 0 ? true : undefined));
    assert.equal(await chart.locator('canvas').count(), 2);

    // An operator closes the chart; the table stays.
    await page.getByRole('button', { name: 'Chart of bank-a' }).first().click();
    await chart.waitFor({ state: 'detached' });
    assert.equal(await page.getByTestId('limit-baseline-bank-a-max').textContent(), '1');
    assert.deepEqual(unexpectedProblems(watched), []);
  });

  await t.test('a viewer sees the limits without controls, and the API refuses its change', async () => {
    assert.equal((await stack.api('PUT', '/limits/baseline/bank-a', { limit: { maxInFlight: 2 } })).status, 200);
    const viewer = await openPage(stack.browser);
    await signIn(viewer.page, stack.baseUrl, viewerToken);
    await goTo(viewer.page, 'Limits');
    await eventually('the limit shows', 10_000, async () =>
      (await viewer.page.getByTestId('limit-baseline-bank-a-setting').textContent()) === '2 in flight' ? true : undefined,
    );
    assert.equal(await viewer.page.getByRole('button', { name: 'Set' }).count(), 0);
    assert.equal(await viewer.page.getByRole('button', { name: 'Remove' }).count(), 0);
    const refused = await viewer.page.evaluate(async () => {
      const token = sessionStorage.getItem('headroom.apiToken');
      const response = await fetch('/api/v1/limits/baseline/bank-a', {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ limit: { maxInFlight: 5 } }),
      });
      return response.status;
    });
    assert.equal(refused, 403);
    assert.deepEqual(await ownLimit(), { maxInFlight: 2 });
    assert.deepEqual(unexpectedProblems(viewer), []);
    await viewer.page.context().close();
  });
});

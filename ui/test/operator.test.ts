/**
 * An operator in a real Chromium against the real control plane, Redis, Unleash, workers and
 * balancers: signs in (a bad token first), raises parallelism and watches capacity follow,
 * moves a traffic slider and finds the split in the API, rolls back and resumes, and finds it
 * all in the audit log.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { eventually } from '@headroom/testkit';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { goTo, openPage, unexpectedProblems } from '../node/browser';
import { operatorToken, startUiStack } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

test('an operator signs in, changes parallelism and traffic, rolls back and resumes', { timeout: 240_000 }, async (t) => {
  const stack = await startUiStack(t, unleash);
  const flagsOf = async () => (await stack.newFlagClient()).flags;
  await stack.fleet.addWorker({ cluster: 'baseline', workerId: 'base-1', maxParallelism: 2 }, undefined, await flagsOf());
  await stack.fleet.addWorker({ cluster: 'candidate', workerId: 'cand-1', maxParallelism: 2 }, undefined, await flagsOf());
  for (const balancerId of ['balancer-a', 'balancer-b']) await stack.fleet.addBalancer({ balancerId }, await flagsOf());
  const watched = await openPage(stack.browser);
  const { page } = watched;

  await t.test("a bad token is refused, in the API's own words", async () => {
    await page.goto(stack.baseUrl);
    await page.getByLabel('API token').fill('not-a-token-of-this-control-plane');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    const text = (await alert.textContent()) ?? '';
    assert.match(text, /HTTP 401 \(HR_ERR_UNAUTHENTICATED\)/);
    assert.match(text, /a valid API token is required/);
    assert.equal(await page.getByRole('navigation', { name: 'Pages' }).count(), 0, 'still signed out');
  });

  await t.test('the operator signs in and sees both clusters, live', async () => {
    await page.getByLabel('API token').fill(operatorToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    const header = (await page.getByRole('banner').textContent()) ?? '';
    assert.match(header, /olga/);
    assert.match(header, /operator/);
    const capacityOf = (role: string) =>
      page
        .getByRole('region', { name: `${role} cluster ${role}` })
        .locator('dt', { hasText: /^Capacity$/ })
        .locator('xpath=following-sibling::dd');
    await eventually('both clusters with 2 slots', 10_000, async () =>
      (await capacityOf('baseline').textContent()) === '2' && (await capacityOf('candidate').textContent()) === '2' ? true : undefined,
    );
    await page.getByRole('status').filter({ hasText: 'live' }).waitFor();
  });

  await t.test('raising max parallelism shows in the capacity within seconds', async () => {
    await goTo(page, 'Parallelism');
    const card = page.getByRole('region', { name: 'Parallelism of candidate' });
    const capacity = card.getByTestId('capacity-candidate');
    await eventually('capacity 2 shown', 10_000, async () => ((await capacity.textContent()) === '2' ? true : undefined));
    await card.getByLabel('New max parallelism per worker').fill('7');
    await card.getByRole('button', { name: 'Review change…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Change max parallelism?' });
    const preview = (await dialog.textContent()) ?? '';
    assert.match(preview, /candidate: from the workers' own setting to 7 per worker/);
    assert.match(preview, /Capacity: from 2 to 7 slots on 1 worker/);
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await eventually('capacity 7 shown', 15_000, async () => ((await capacity.textContent()) === '7' ? true : undefined));
    assert.deepEqual((await stack.api('GET', '/parallelism')).body, { clusters: { baseline: null, candidate: 7 } });
    const status = (await page.getByRole('status', { name: 'Parallelism change' }).textContent()) ?? '';
    assert.match(status, /as expected \(1 × 7\)/);
  });

  await t.test('moving the traffic slider and confirming changes the split in the API', async () => {
    await goTo(page, 'Traffic');
    const slider = page.getByLabel('bank-a', { exact: true });
    await slider.focus();
    for (let i = 0; i < 30; i++) await slider.press('ArrowRight');
    assert.equal(await page.getByLabel('bank-a: percent on the candidate').inputValue(), '30');
    await page.getByRole('button', { name: 'Review 1 change…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Change the traffic split?' });
    assert.match((await dialog.textContent()) ?? '', /bank-a: from 0% to 30%/);
    assert.equal((await stack.api('GET', '/traffic')).body.flag.integrations['bank-a'].percent, 0, 'nothing changes before the confirmation');
    await dialog.getByRole('button', { name: 'Apply' }).click();
    const applied = page.getByRole('status', { name: 'Change applied' });
    await applied.waitFor();
    // Then the page shows when every balancer's flag client has the new split.
    const propagated = applied.getByTestId('traffic-propagated');
    await propagated.waitFor({ timeout: 15_000 });
    assert.match((await propagated.textContent()) ?? '', /^Every balancer has it \(2 of 2\), \d+\.\d s after the change\.$/);
    const traffic = (await stack.api('GET', '/traffic')).body;
    assert.deepEqual(
      traffic.balancers.map((b: { trafficFlagUpToDate: boolean }) => b.trafficFlagUpToDate),
      [true, true],
    );
    assert.deepEqual(traffic.flag.integrations['bank-a'], { percent: 30, rolledBack: false });
    assert.equal(traffic.effectivePercent.integrations['bank-a'], 30);
    assert.equal(traffic.flag.integrations['bank-b'].percent, 0, 'only what was moved');
  });

  await t.test("rollback: confirmed, then every balancer's acknowledgement and the propagation time", async () => {
    await goTo(page, 'Rollback');
    await page.getByLabel('Reason (for the audit log; a resume takes it too)').fill('p95 ratio 1.7 on bank-a');
    await page.getByRole('button', { name: 'Roll back all integrations' }).click();
    const dialog = page.getByRole('dialog', { name: 'Roll back to the baseline cluster?' });
    await dialog.getByRole('button', { name: 'Roll back now' }).click();
    const result = page.getByRole('region', { name: 'Rollback result' });
    await result.waitFor();
    const text = (await result.textContent()) ?? '';
    const record = (await stack.api('GET', '/traffic')).body.lastRollback;
    assert.deepEqual(record.acknowledged.map((a: { balancerId: string }) => a.balancerId).sort(), ['balancer-a', 'balancer-b']);
    assert.match(text, /Every balancer has it: 2 acknowledged/);
    assert.match(text, new RegExp(`override version ${record.overrideVersion}`));
    for (const balancerId of ['balancer-a', 'balancer-b']) assert.match(text, new RegExp(balancerId));
    const shownMs = Number(/propagation ([\d.]+) ms/.exec(text)?.[1]);
    assert.ok(
      Math.abs(shownMs - record.propagationMs) <= Math.max(0.01, record.propagationMs * 0.01),
      `shows ${shownMs} ms, the API says ${record.propagationMs} ms`,
    );
    assert.match(text, /Reason: p95 ratio 1\.7 on bank-a/);
    // The answer comes when every balancer has it; the Unleash write is shown when it is done.
    await result.getByText('Durable: the flag is switched off in Unleash too').waitFor();
    await page
      .getByRole('status')
      .filter({ hasText: 'Everything is rolled back to the baseline' })
      .filter({ hasText: 'Reason: p95 ratio 1.7 on bank-a' })
      .waitFor();
    assert.equal((await stack.api('GET', '/traffic')).body.override.all, true);
  });

  await t.test('resume is a separate, confirmed action, acknowledged too', async () => {
    await page.getByRole('button', { name: 'Resume all integrations' }).click();
    await page.getByRole('dialog', { name: 'Resume traffic to the candidate?' }).getByRole('button', { name: 'Resume' }).click();
    const result = page.getByRole('region', { name: 'Resume result' });
    await result.waitFor();
    assert.match((await result.textContent()) ?? '', /Every balancer has it: 2 acknowledged/);
    await result.getByText('Durable: the flag is switched on in Unleash too').waitFor();
    const traffic = (await stack.api('GET', '/traffic')).body;
    assert.equal(traffic.flag.enabled, true);
    assert.equal(traffic.override.all, false);
    await page.getByRole('status').filter({ hasText: 'Nothing is rolled back' }).waitFor();
  });

  await t.test('the audit log shows each change, who made it, before and after', async () => {
    await goTo(page, 'Audit');
    const rows = page.locator('.audit-table tbody tr');
    await eventually('four changes listed', 10_000, async () => ((await rows.count()) >= 4 ? true : undefined));
    const texts = await rows.allTextContents();
    for (const action of ['resume', 'rollback', 'traffic.set', 'parallelism.set']) {
      assert.ok(
        texts.some((row) => row.includes(action) && row.includes('olga')),
        `${action} by olga in ${JSON.stringify(texts)}`,
      );
    }
    assert.ok(
      texts.some((row) => row.includes('parallelism.set') && row.includes('candidate: none → 7')),
      'what changed, from and to',
    );
    assert.ok(
      texts.some((row) => row.includes('rollback') && row.includes('Reason: p95 ratio 1.7 on bank-a')),
      'the rollback with its reason',
    );
    assert.ok(
      texts.some((row) => row.includes('traffic.set') && row.includes('integrations.bank-a.percent: 0 → 30')),
      'what changed, from and to',
    );
  });

  await t.test('the audit log is kept in PostgreSQL: with every Redis key of this stack deleted, the Audit page lists the same changes', async () => {
    const rows = page.locator('.audit-table tbody tr');
    // The control plane writes the override again once Redis lost it: that entry comes on top.
    const listed = async () => (await rows.allTextContents()).filter((row) => !row.includes('override.rebuild'));
    const before = await listed();
    assert.ok(before.length >= 4);
    // What a FLUSHALL does to this stack, without touching other tests' keys on the shared Redis.
    const redis = stack.fleet.redis as unknown as { scan(...args: (string | number)[]): Promise<[string, string[]]>; del(...keys: string[]): Promise<number> };
    let deleted = 0;
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `{${stack.fleet.ledgerOptions.keyPrefix!}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) deleted += await redis.del(...keys);
    } while (cursor !== '0');
    assert.ok(deleted > 0, 'the stack had keys');
    await page.reload();
    await goTo(page, 'Audit');
    await eventually('the changes listed again', 10_000, async () => ((await listed()).length === before.length ? true : undefined));
    assert.deepEqual(await listed(), before);
  });

  assert.deepEqual(unexpectedProblems(watched), [], 'no script error, CSP violation or dialog in the page');
});

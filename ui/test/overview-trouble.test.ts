/**
 * What the operator of the slow-bank incident could not see, in a real Chromium: more slots in
 * use than exist comes with the reason (the ledger's drift) on the Overview, the worker's row
 * says so, and tasks the balancers failed in their queues count as the cluster's errors.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { BalancerErrorRecorder, clusterKeys } from '@headroom/fleet';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { goTo, openPage, signIn, unexpectedProblems } from '../node/browser';
import { startUiStack, viewerToken } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

test(
  'more slots in use than exist says why (ledger drift) on the Overview and the worker row, and queue errors count as the cluster errors',
  { timeout: 120_000 },
  async (t) => {
    const stack = await startUiStack(t, unleash);
    const { fleet } = stack;
    // A worker of 3 slots running 3 tasks, whose heartbeats the test sends: it decides when they settle.
    const running = ['drift-w1|task-1', 'drift-w1|task-2', 'drift-w1|task-3'];
    let dispatchGraceMs = 120_000;
    const beat = () =>
      fleet.ledger.heartbeat('baseline', {
        workerId: 'drift-w1',
        address: '127.0.0.1:1',
        capacity: 3,
        draining: false,
        heldLeaseIds: running,
        dispatchGraceMs,
      });
    await beat();
    // Twelve releases lost on their way: records the worker does not hold, counted from the next heartbeat.
    const leases = `${clusterKeys(fleet.ledgerOptions.keyPrefix!, 'baseline').leasesPrefix}drift-w1`;
    for (let i = 0; i < 12; i++) await fleet.redis.hset(leases, `lost-${i}`, String(Date.now()));
    await beat();
    const beating = setInterval(() => void beat().catch(() => undefined), 200);
    t.after(() => clearInterval(beating));
    // Sixty tasks of bank-slow whose deadline passed in a balancer's queue, as the balancer counts them.
    const balancerErrors = new BalancerErrorRecorder(fleet.redis, { keyPrefix: fleet.ledgerOptions.keyPrefix! });
    for (let i = 0; i < 60; i++) balancerErrors.record('baseline', 'bank-slow', 'HR_ERR_DEADLINE_EXCEEDED');
    await balancerErrors.flush();

    const watched = await openPage(stack.browser);
    const { page } = watched;
    await signIn(page, stack.baseUrl, viewerToken);
    const card = page.getByRole('region', { name: /baseline cluster/ });
    const caption = card.locator('.bar-caption');
    await caption.filter({ hasText: '15 of 3 slots in use' }).waitFor();
    assert.equal(
      (await caption.textContent())?.trim(),
      '15 of 3 slots in use — the ledger counts 12 more than the workers run (ledger drift); it corrects at their next heartbeats',
    );
    assert.equal(await card.locator('.stat', { hasText: 'In flight' }).locator('.stat-note').textContent(), 'workers run 3');
    const errors = card.locator('.stat', { has: page.locator('dt', { hasText: /^Errors$/ }) }).locator('dd');
    assert.match((await errors.textContent()) ?? '', /^[3-6]\.\d\d\/s/, 'the queue errors are the cluster errors');
    assert.doesNotMatch(
      (await card
        .locator('.stat', { has: page.locator('dt', { hasText: /^Tasks$/ }) })
        .locator('dd')
        .textContent()) ?? '',
      /^0\.00\/s/,
    );
    assert.match(
      (await card.locator('.balancer-errors').textContent()) ?? '',
      /^[3-6]\.\d\d\/s of the errors failed in the balancers before any worker ran them: bank-slow HR_ERR_DEADLINE_EXCEEDED [3-6]\.\d\d\/s$/,
    );
    const candidate = page.getByRole('region', { name: /candidate cluster/ });
    assert.equal(await candidate.locator('.balancer-errors').count(), 0);

    await goTo(page, 'Workers');
    const row = page.locator('.worker-table tbody tr').filter({ has: page.locator('th', { hasText: 'drift-w1' }) });
    const tag = row.locator('.tag', { hasText: 'ledger drift' });
    await tag.waitFor();
    assert.equal(await tag.textContent(), 'ledger drift +12');
    assert.match(
      (await tag.getAttribute('title')) ?? '',
      /^The ledger counts 15 slots in use on this worker; it held 3 tasks at its last heartbeat \(\d+ s ago\)\. .+its next heartbeats correct\.$/,
    );
    assert.match((await row.locator('.slots').textContent()) ?? '', /15 \/ 3/);

    // A heartbeat past the grace drops the lost records: the tag goes (the page polls), the caption is plain again.
    dispatchGraceMs = 0;
    await tag.waitFor({ state: 'detached', timeout: 15_000 });
    await goTo(page, 'Overview');
    await caption.filter({ hasText: /^3 of 3 slots in use$/ }).waitFor();
    assert.deepEqual(unexpectedProblems(watched), []);
    await page.context().close();
  },
);

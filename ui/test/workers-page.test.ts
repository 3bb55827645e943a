/**
 * The Workers page in a real Chromium: a worker the balancers marked unreachable in the ledger
 * says so on its row, and stops saying so once the mark is cleared; so does a worker that
 * protects itself (fewer slots while its event loop stalls).
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { goTo, openPage, signIn, unexpectedProblems } from '../node/browser';
import { startUiStack, viewerToken } from './ui-stack';
import { eventLoopBlocker, submit, task } from '@headroom/testkit';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

test('a worker balancers cannot reach is shown as unreachable on the Workers page', { timeout: 120_000 }, async (t) => {
  const stack = await startUiStack(t, unleash);
  const { fleet } = stack;
  await fleet.addWorker({ cluster: 'baseline', workerId: 'reachable-w1', maxParallelism: 2 });
  const beat = () => fleet.ledger.heartbeat('baseline', { workerId: 'unreachable-w2', address: '127.0.0.1:1', capacity: 4, draining: false, heldLeaseIds: [] });
  await beat();
  const beating = setInterval(() => void beat().catch(() => undefined), 200);
  t.after(() => clearInterval(beating));
  assert.equal((await fleet.ledger.markUnreachable('baseline', 'unreachable-w2', 120_000, 1)).result, 'marked');

  const watched = await openPage(stack.browser);
  const { page } = watched;
  await signIn(page, stack.baseUrl, viewerToken);
  await goTo(page, 'Workers');
  const row = (workerId: string) => page.locator('.worker-table tbody tr').filter({ has: page.locator('th', { hasText: workerId }) });
  const tag = row('unreachable-w2').locator('.tag', { hasText: 'unreachable' });
  await tag.waitFor();
  assert.match(
    (await tag.getAttribute('title')) ?? '',
    /Balancers could not connect to 127\.0\.0\.1:1: none sends it a task until .+, or until a health check passes/,
  );
  await row('reachable-w1').waitFor();
  assert.equal(await row('reachable-w1').locator('.tag', { hasText: 'unreachable' }).count(), 0);

  // A health check passed: the mark is gone, and so is the tag (the page polls).
  await fleet.ledger.clearUnreachable('baseline', 'unreachable-w2');
  await tag.waitFor({ state: 'detached' });

  // Ejected for failing far more than its peers: another tag, that says so.
  assert.equal((await fleet.ledger.markUnreachable('baseline', 'unreachable-w2', 120_000, 1, 'failing')).result, 'marked');
  const failing = row('unreachable-w2').locator('.tag', { hasText: 'failing' });
  await failing.waitFor();
  assert.match(
    (await failing.getAttribute('title')) ?? '',
    /unreachable-w2 failed far more tasks than the other workers on the same integration: no balancer sends it a task until .+, when its back-off ends/,
  );
  assert.equal(await row('unreachable-w2').locator('.tag', { hasText: 'unreachable' }).count(), 0);
  await fleet.ledger.clearUnreachable('baseline', 'unreachable-w2');
  await failing.waitFor({ state: 'detached' });
  assert.deepEqual(unexpectedProblems(watched), []);
  await page.context().close();
});

test('a worker protecting itself says so on its row, with the figure and its line, until it recovers', { timeout: 120_000 }, async (t) => {
  const stack = await startUiStack(t, unleash);
  const { fleet } = stack;
  const blocker = eventLoopBlocker();
  await fleet.addWorker(
    { cluster: 'baseline', workerId: 'stalling-w1', maxParallelism: 8, protectEventLoopDelayP99Ms: 150, protectCheckIntervalMs: 250, reportIntervalMs: 200 },
    { 'bank-a': blocker.handler },
  );
  await fleet.addBalancer();

  const watched = await openPage(stack.browser);
  const { page } = watched;
  await signIn(page, stack.baseUrl, viewerToken);
  await goTo(page, 'Workers');
  const row = page.locator('.worker-table tbody tr').filter({ has: page.locator('th', { hasText: 'stalling-w1' }) });
  await row.waitFor();
  const tag = row.locator('.tag', { hasText: 'loop stalled' });
  // Not stalled before the test stalls it. The worker shares this process's event loop, so a
  // stall of the loaded machine at start-up (Chromium starting, the page loading) may have
  // tripped its self-protection already: wait until that has passed, as it must by itself.
  await tag.waitFor({ state: 'detached', timeout: 30_000 });

  // Stalls until the page (which polls every few seconds) has shown the tag: at most 30 of them.
  blocker.blockMs = 600;
  for (let stalls = 0; stalls < 30 && (await tag.count()) === 0; stalls++) {
    assert.ok((await submit(fleet.clients[0]!, task({ integration: 'bank-a' }))).ok);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  await tag.waitFor({ timeout: 1000 });
  assert.match((await tag.textContent()) ?? '', /loop stalled: (50|25|13|6)% of slots/);
  assert.match(
    (await tag.getAttribute('title')) ?? '',
    /Self-protection since .+: its event-loop delay p99 was \d+ ms \(line 150 ms\); it advertises .+ of its slots until it is back below 80% of the line/,
  );
  blocker.blockMs = 0;
  // Quick handlers again: every slot comes back and the tag goes (the page polls).
  await tag.waitFor({ state: 'detached', timeout: 15_000 });
  assert.deepEqual(unexpectedProblems(watched), []);
  await page.context().close();
});

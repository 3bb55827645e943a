/**
 * The Workers page in a real Chromium: a worker the balancers marked unreachable in the ledger
 * says so on its row, and stops saying so once the mark is cleared.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { goTo, openPage, signIn, unexpectedProblems } from '../node/browser';
import { startUiStack, viewerToken } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

test('a worker balancers cannot reach is shown as unreachable on the Workers page', { timeout: 120_000 }, async (t) => {
  const stack = await startUiStack(t, unleash);
  const { fleet } = stack;
  await fleet.addWorker({ cluster: 'baseline', workerId: 'reachable-w1', maxParallelism: 2 });
  const beat = () => fleet.ledger.heartbeat('baseline', { workerId: 'unreachable-w2', address: '127.0.0.1:1', capacity: 4, draining: false, runningTasks: 0, answeredTasks: 0 });
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
  assert.match((await tag.getAttribute('title')) ?? '', /Balancers could not connect to 127\.0\.0\.1:1: none sends it a task until .+, or until a health check passes/);
  await row('reachable-w1').waitFor();
  assert.equal(await row('reachable-w1').locator('.tag', { hasText: 'unreachable' }).count(), 0);

  // A health check passed: the mark is gone, and so is the tag (the page polls).
  await fleet.ledger.clearUnreachable('baseline', 'unreachable-w2');
  await tag.waitFor({ state: 'detached' });
  assert.deepEqual(unexpectedProblems(watched), []);
  await page.context().close();
});

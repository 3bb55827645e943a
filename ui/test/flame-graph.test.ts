/**
 * The flame graph of a CPU profile in a real Chromium, on a real stack: an operator profiles a
 * worker whose handler keeps the CPU busy, and the Workers page draws the profile with that
 * handler among its frames; hovering shows its times and where it is, clicking zooms in on it.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { ClosedLoop } from '@headroom/sim';
import { burnCpuForProfileTest, eventually, submit, task } from '@headroom/testkit';
import { goTo, openPage, signIn, unexpectedProblems } from '../node/browser';
import { operatorToken, startUiStack } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

test(
  'a finished profile is drawn as a flame graph: the busy handler is a frame, with its times on hover, and a click zooms in on it',
  { timeout: 180_000 },
  async (t) => {
    const stack = await startUiStack(t, unleash);
    const { fleet } = stack;
    const hot = await fleet.addWorker({ cluster: 'baseline', workerId: 'hot-w1', maxParallelism: 2 }, { '*': burnCpuForProfileTest });
    await fleet.addBalancer();

    // Tasks for the worker, two at a time, until the profile is drawn (at most 1,000, or 2 minutes).
    const load = new ClosedLoop({ lanes: 2, maxCalls: 1000, maxDurationMs: 120_000, call: () => submit(fleet.clients[0]!, task({ integration: 'bank-a' })) });
    t.after(async () => {
      load.stop();
      await load.finished();
    });

    const watched = await openPage(stack.browser);
    const { page } = watched;
    await signIn(page, stack.baseUrl, operatorToken);
    await goTo(page, 'Workers');
    await page.getByRole('button', { name: `Profile ${hot.workerId}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Profile this worker?' });
    await dialog.getByLabel('Duration').selectOption({ label: '5 s' });
    await dialog.getByRole('button', { name: 'Start profiling' }).click();

    // The panel polls every second while the profile runs; then it fetches and draws it.
    const graph = page.getByRole('figure', { name: 'Flame graph of CPU time' });
    await graph.waitFor({ timeout: 30_000 });
    load.stop();
    const frame = graph.locator('g.frame[name="burnCpuForProfileTest"]').first();
    await frame.waitFor();
    // The frame's label shows the name once drawn (the handler takes most of the CPU: a wide frame).
    await eventually('the label of the busy frame', 5000, async () =>
      (await frame.locator('.d3-flame-graph-label').textContent()) === 'burnCpuForProfileTest' ? true : undefined,
    );
    assert.ok((await graph.locator('g.frame').count()) > 3, 'frames for the callers as well');

    // Hover: the tooltip and the line under the graph give where it is and its self and total time.
    await frame.hover();
    const details = /^burnCpuForProfileTest — file:\/\/\/.+\/testkit\/dist\/src\/cpu-burn\.js:\d+\nself [\d.]+ m?s \([\d.]+%\), total [\d.]+ m?s \([\d.]+%\)$/;
    const tip = page.locator('.d3-flame-graph-tip');
    await tip.waitFor({ state: 'visible' });
    assert.match((await tip.evaluate((element) => (element as HTMLElement).innerText)).trim(), details);
    const line = page.getByTestId('flame-details');
    assert.match((await line.evaluate((element) => (element as HTMLElement).innerText)).trim(), details);

    // Click: zoomed in, the frame takes the whole width; "Show all" zooms back out.
    const graphWidthPx = Number(await graph.locator('svg').getAttribute('width'));
    const widthPx = async () => Number(await frame.locator('rect').getAttribute('width'));
    assert.ok((await widthPx()) < graphWidthPx, 'not yet the whole width');
    await frame.click();
    await eventually('the zoomed frame to fill the width', 5000, async () => (Math.abs((await widthPx()) - graphWidthPx) < 1 ? true : undefined));
    const showAll = page.getByRole('button', { name: 'Show all' });
    await showAll.click();
    await showAll.waitFor({ state: 'detached' });
    await eventually('the frame back to its share', 5000, async () => ((await widthPx()) < graphWidthPx - 1 ? true : undefined));

    assert.deepEqual(unexpectedProblems(watched), []);
    await page.context().close();
  },
);

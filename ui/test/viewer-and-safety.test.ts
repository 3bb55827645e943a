/**
 * In a real Chromium against the real control plane: a viewer sees everything with every
 * control disabled (and the API refuses the same changes sent with its token); names from the
 * fleet are shown as text, never run; an API error is shown in its own words; every page fits
 * a narrow window and works from the keyboard; the live stream comes back after a restart.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { connected, eventually } from '@headroom/testkit';
import { OverrideStore } from '@headroom/fleet';
import { createControlPlane } from '@headroom/control-plane';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { goTo, openPage, signIn, unexpectedProblems } from '../node/browser';
import { operatorToken, startUiStack, uiDirectory, viewerToken } from './ui-stack';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

const hostileWorkerId = '<img src=x onerror=window.__pwned=1>';
const hostileBalancerId = '<script>window.__pwned=2</script>';
const longWorkerId = 'worker-with-a-rather-long-name-0123456789-abcdefghij-klmnopqrstuvwxyz-0123456789';
const pages = ['Overview', 'Traffic', 'Rollback', 'Parallelism', 'Limits', 'Workers', 'Audit'];

test('viewers, hostile names, API errors, narrow windows, the keyboard, a restart', { timeout: 240_000 }, async (t) => {
  const stack = await startUiStack(t, unleash);
  await stack.fleet.addWorker({ cluster: 'candidate', workerId: longWorkerId, maxParallelism: 3 });
  // Names no worker or balancer of ours would take, written to the ledger as any process may:
  // kept alive by heartbeats until the test ends.
  const overrides = new OverrideStore(stack.fleet.redis, stack.fleet.ledgerOptions.keyPrefix!);
  const heartbeat = () =>
    Promise.all([
      stack.fleet.ledger.heartbeat('baseline', { workerId: hostileWorkerId, address: '"><b>127.0.0.1:1</b>', capacity: 2, draining: false, heldLeaseIds: [] }),
      overrides.balancerHeartbeat(hostileBalancerId, { address: '<i>here</i>', queued: { userPresent: 1, background: 4 }, trafficFlag: null }),
    ]);
  await heartbeat();
  const heartbeats = setInterval(() => void heartbeat().catch(() => undefined), 200);
  t.after(() => clearInterval(heartbeats));

  await t.test('a viewer sees every page with every control disabled, and says why', async () => {
    const watched = await openPage(stack.browser);
    const { page } = watched;
    await signIn(page, stack.baseUrl, viewerToken);
    assert.match((await page.getByRole('banner').textContent()) ?? '', /victor.*viewer/);
    const why = "You are signed in as victor, a viewer: changes need an operator's token.";

    await goTo(page, 'Traffic');
    await page.getByRole('note').filter({ hasText: why }).waitFor();
    const slider = page.getByLabel('bank-a', { exact: true });
    assert.equal(await slider.isDisabled(), true);
    assert.equal(await slider.getAttribute('title'), why);
    assert.equal(await page.getByLabel('bank-a: percent on the candidate').isDisabled(), true);
    assert.equal(await page.getByRole('button', { name: /^Review/ }).isDisabled(), true);

    await goTo(page, 'Parallelism');
    assert.equal(await page.getByRole('region', { name: 'Parallelism of candidate' }).getByLabel('New max parallelism per worker').isDisabled(), true);

    await goTo(page, 'Workers');
    await page.getByRole('button', { name: `Drain ${longWorkerId}` }).waitFor();
    assert.equal(await page.getByRole('button', { name: `Drain ${longWorkerId}` }).isDisabled(), true);
    assert.equal(await page.getByRole('button', { name: `Profile ${longWorkerId}` }).isDisabled(), true);

    await goTo(page, 'Rollback');
    const rollback = page.getByRole('button', { name: 'Roll back all integrations' });
    assert.equal(await rollback.isDisabled(), true);
    assert.equal(await rollback.getAttribute('title'), why);
    assert.deepEqual(unexpectedProblems(watched), []);

    // The API refuses anyway: the same calls, sent from the page with the token it holds.
    const refused = await page.evaluate(async () => {
      const token = sessionStorage.getItem('headroom.apiToken');
      const call = async (method: string, path: string, body: unknown) => {
        const response = await fetch(`/api/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        return { status: response.status, body: (await response.json()) as { error: { code: string; message: string } } };
      };
      return [
        await call('POST', '/rollback', {}),
        await call('PUT', '/traffic', { defaultPercent: 50 }),
        await call('PUT', '/parallelism', { clusters: { candidate: 9 } }),
      ];
    });
    for (const answer of refused) {
      assert.equal(answer.status, 403);
      assert.match(answer.body.error.message, /token "victor" is a viewer's: changes need an operator's token; nothing was changed/);
    }
    const traffic = (await stack.api('GET', '/traffic')).body;
    assert.equal(traffic.override.all, false, 'nothing was rolled back');
    assert.equal(traffic.flag.defaultPercent, 0);
    assert.deepEqual((await stack.api('GET', '/parallelism')).body.clusters, { baseline: null, candidate: null });
    await page.context().close();
  });

  await t.test('names from the fleet are shown as text and nothing in them runs', async () => {
    const watched = await openPage(stack.browser);
    const { page } = watched;
    await signIn(page, stack.baseUrl, operatorToken);
    await page.getByRole('list', { name: 'Queued tasks at each balancer' }).getByText(hostileBalancerId, { exact: true }).waitFor();
    await goTo(page, 'Workers');
    const cell = page.locator('.worker-table tbody th').filter({ hasText: hostileWorkerId });
    await cell.waitFor();
    assert.equal(await cell.locator('.truncated').first().textContent(), hostileWorkerId);
    assert.equal(await page.locator('main img, main script, main b, main i').count(), 0, 'no element was made from a name');
    await goTo(page, 'Rollback');
    await page.getByRole('cell', { name: hostileBalancerId }).waitFor();
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
    assert.deepEqual(unexpectedProblems(watched), []);

    // An API error in its own words: this name is not a valid worker id for the drain call.
    await goTo(page, 'Workers');
    await page.getByRole('button', { name: `Drain ${hostileWorkerId}` }).click();
    await page.getByRole('dialog', { name: 'Drain this worker?' }).getByRole('button', { name: 'Drain' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'Draining' });
    await alert.waitFor();
    const text = (await alert.textContent()) ?? '';
    assert.match(text, /HTTP 400 \(HR_ERR_INVALID_REQUEST\)/);
    assert.match(text, /path\.workerId: expected 1-128 characters of A-Z, a-z, 0-9/);
    assert.match(text, /Nothing was changed\./);
    assert.deepEqual((await stack.api('GET', '/audit')).body.entries, [], 'no change recorded');
    await page.context().close();
  });

  await t.test('every page fits a 420 px window: long names are cut with an ellipsis, wide tables scroll inside', async () => {
    const watched = await openPage(stack.browser, { widthPx: 420, heightPx: 900 });
    const { page } = watched;
    await signIn(page, stack.baseUrl, operatorToken);
    for (const title of pages) {
      await goTo(page, title);
      // Give live figures and polled data a moment to render what they bring.
      await page.waitForTimeout(700);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      assert.ok(overflow <= 0, `${title}: the page is ${overflow} px wider than the window`);
    }
    await goTo(page, 'Workers');
    const name = page.locator('.worker-table .truncated', { hasText: longWorkerId });
    const cut = await name.evaluate((element) => ({ scroll: element.scrollWidth, client: element.clientWidth, title: element.getAttribute('title') }));
    assert.ok(cut.scroll > cut.client, `the long id is cut (${cut.scroll} > ${cut.client})`);
    assert.equal(cut.title, longWorkerId, 'and whole in its tooltip');
    assert.deepEqual(unexpectedProblems(watched), []);
    await page.context().close();
  });

  await t.test('the keyboard alone signs in, moves between pages and confirms or cancels a change, with focus visible', async () => {
    const watched = await openPage(stack.browser);
    const { page } = watched;
    await page.goto(stack.baseUrl);
    // The sign-in field takes the focus by itself once the app has rendered (slow on a busy machine).
    await page.getByLabel('API token').waitFor();
    await page.waitForFunction(() => document.activeElement instanceof HTMLInputElement, undefined, { timeout: 10_000 });
    await page.keyboard.type(operatorToken);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();

    const focused = () =>
      page.evaluate(() => ({
        text: document.activeElement?.textContent ?? '',
        tag: document.activeElement?.tagName ?? '',
        outline: getComputedStyle(document.activeElement!).outlineStyle,
      }));
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    assert.deepEqual(await focused(), { text: 'Traffic', tag: 'A', outline: 'solid' });
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Traffic', level: 1 }).waitFor();

    await page.getByLabel('bank-b', { exact: true }).focus();
    await page.keyboard.press('End');
    await page.getByRole('button', { name: 'Review 1 change…' }).focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Change the traffic split?' });
    await dialog.waitFor();
    assert.match((await dialog.textContent()) ?? '', /bank-b: from 0% to 100%/);
    assert.equal((await focused()).text, 'Cancel', 'focus starts on Cancel');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    assert.equal((await stack.api('GET', '/traffic')).body.flag.integrations['bank-b'].percent, 0, 'cancelled: nothing changed');

    await page.getByRole('button', { name: 'Review 1 change…' }).focus();
    await page.keyboard.press('Enter');
    await dialog.waitFor();
    await page.keyboard.press('Tab');
    assert.equal((await focused()).text, 'Apply');
    await page.keyboard.press('Enter');
    await page.getByRole('status', { name: 'Change applied' }).waitFor();
    await eventually('bank-b at 100%', 5000, async () =>
      (await stack.api('GET', '/traffic')).body.flag.integrations['bank-b'].percent === 100 ? true : undefined,
    );
    assert.deepEqual(unexpectedProblems(watched), []);
    await page.context().close();
  });

  await t.test('when the control plane restarts, the page says so and follows the new one, with no reload', async () => {
    const watched = await openPage(stack.browser);
    const { page } = watched;
    await signIn(page, stack.baseUrl, operatorToken);
    const indicator = page.getByRole('banner').getByRole('status');
    await indicator.filter({ hasText: 'live' }).waitFor();
    const { port } = stack.controlPlane;
    await stack.controlPlane.close();
    await indicator.filter({ hasText: 'reconnecting' }).waitFor();

    // The same control plane again, on the same port: as after a deploy.
    const subscriber = await connected(undefined, true);
    t.after(() => subscriber.disconnect());
    const again = await createControlPlane(
      {
        port,
        integrations: ['bank-a', 'bank-b'],
        unleash: {
          url: unleash.url,
          adminToken: unleash.adminToken,
          candidateFlag: stack.flagNames.candidateCluster,
          parallelismFlag: stack.flagNames.maxParallelism,
        },
        tokens: [{ name: 'olga', role: 'operator', token: operatorToken }],
        uiDirectory,
        figuresIntervalMs: 300,
        database: { url: stack.database.url, schema: stack.database.schema },
      },
      { redis: stack.fleet.redis, subscriber, keyPrefix: stack.fleet.ledgerOptions.keyPrefix! },
    );
    t.after(() => again.close());
    await indicator.filter({ hasText: 'live' }).waitFor({ timeout: 20_000 });
    const figuresAt = async () => (await page.locator('.page-head .muted').textContent()) ?? '';
    const first = await figuresAt();
    await eventually('new figures after the restart', 5000, async () => ((await figuresAt()) !== first ? true : undefined));
    // What a request meets while the server is away: refused, or closed before (EMPTY_RESPONSE,
    // CONNECTION_RESET) or during (INCOMPLETE_CHUNKED_ENCODING) its answer.
    assert.deepEqual(
      unexpectedProblems(watched).filter(
        (problem) => !/ERR_CONNECTION_REFUSED|ERR_CONNECTION_RESET|ERR_EMPTY_RESPONSE|ERR_INCOMPLETE_CHUNKED_ENCODING|network/i.test(problem),
      ),
      [],
    );
    await page.context().close();
  });
});

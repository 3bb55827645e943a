#!/usr/bin/env node
/**
 * Screenshots of every page of the admin UI, from the real demo (`npm start`'s launcher): it
 * starts the demo, waits until live figures flow, makes a few changes an operator would (a
 * split per integration, a parallelism step, a rollback of one integration, a CPU profile, and
 * last a rollout for the autopilot), signs in and saves a 1280x800 PNG of each page (the
 * Rollouts page whole), one of the overview in a narrow window and one of the Workers page's
 * CPU profile (its flame graph), to docs/screenshots/. Then it stops the demo with SIGINT, as
 * Ctrl-C would.
 *   npm run build && npm run screenshots --workspace @headroom/ui
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import type { ProfileRecord } from '@headroom/control-plane';
import { ControlPlaneApi } from '@headroom/testkit';
import { goTo, launchBrowser, openPage, signIn, unexpectedProblems } from '../node/browser';

const repoRoot = path.join(__dirname, '..', '..', '..');
const demoCli = path.join(repoRoot, 'demo', 'dist', 'src', 'cli.js');
const outputDirectory = path.join(repoRoot, 'docs', 'screenshots');
const demoArgs = [
  '--control-plane-port',
  '0',
  '--balancer-port',
  '0',
  '--baseline-workers',
  '6',
  '--candidate-workers',
  '3',
  '--rate',
  '30',
  '--candidate-percent',
  '50',
];

const timeouts = {
  /** Unleash on an embedded PostgreSQL, then every process of the demo. */
  demoStartMs: 180_000,
  /** Enough 10-second latency slots for the charts to show a trend. */
  liveDataMs: 150_000,
  minimumLiveMs: 60_000,
  profileMs: 30_000,
  rolloutReadingMs: 60_000,
  /** Long enough for the autopilot to take the plan's second step when the gates hold. */
  rolloutRunMs: 50_000,
  demoStopMs: 60_000,
};

interface DemoAccess {
  uiUrl: string;
  apiUrl: string;
  operatorToken: string;
}

/** The pages, by their title in the navigation, and what shows each is ready. */
const pages: { title: string; ready(page: Page): Promise<unknown> }[] = [
  { title: 'Overview', ready: (page) => page.locator('.chart-plot canvas').nth(3).waitFor() },
  { title: 'Traffic', ready: (page) => page.getByLabel('bank-a', { exact: true }).waitFor() },
  { title: 'Rollback', ready: (page) => page.getByRole('region', { name: 'Last rollback' }).waitFor() },
  { title: 'Parallelism', ready: (page) => page.getByText('Max parallelism:').first().waitFor() },
  { title: 'Workers', ready: (page) => page.getByRole('figure', { name: 'Flame graph of CPU time' }).locator('g.frame').nth(3).waitFor() },
  { title: 'Audit', ready: (page) => page.locator('.audit-table tbody tr').nth(2).waitFor() },
  // The autopilot's first reading with figures (it reads every 2 s once enough tasks ran in the window).
  {
    title: 'Rollouts',
    ready: (page) =>
      page
        .locator('.gate-table caption .gate-status', { hasText: /ok|close|breached/ })
        .first()
        .waitFor({ timeout: timeouts.rolloutReadingMs }),
  },
];

/** Short windows and holds, so that the page shows a step taken within the script's run. */
const demoRolloutPlan = {
  name: 'candidate v2',
  integrations: ['bank-a', 'bank-b'],
  windowSeconds: 20,
  holdSeconds: 20,
  minSamples: 20,
  // The simulated banks fail a share of calls (bank-b 1%): over a 20 s window of a few hundred tasks, chance alone can pass a 1% line.
  gates: { p50Ratio: 1.5, p95Ratio: 2, errorRateIncrease: 0.05 },
  steps: [
    { candidatePercent: 60, maxParallelism: 12 },
    { candidatePercent: 80, search: { from: 12, factor: 1.5, max: 24 } },
    { candidatePercent: 100, maxParallelism: 16, holdSeconds: 120 },
  ],
};

function log(message: string): void {
  process.stdout.write(`${message}\n`);
}

/** Starts the demo and resolves with what it prints once everything runs. */
function startDemo(): { child: ChildProcess; access: Promise<DemoAccess>; output(): string } {
  const child = spawn(process.execPath, [demoCli, ...demoArgs], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const access = new Promise<DemoAccess>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the demo did not print its addresses within ${timeouts.demoStartMs / 1000} s:\n${output}`)),
      timeouts.demoStartMs,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const uiUrl = /^Admin UI:\s+(http\S+)/m.exec(output)?.[1];
      const apiUrl = /^Control plane:\s+(http\S+)/m.exec(output)?.[1];
      const operatorToken = /^\s+operator token:\s+(\S+)/m.exec(output)?.[1];
      if (uiUrl && apiUrl && operatorToken) {
        clearTimeout(timer);
        resolve({ uiUrl, apiUrl, operatorToken });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the demo exited (${signal ?? code}) before it was ready:\n${output}`));
    });
  });
  return { child, access, output: () => output };
}

async function stopDemo(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGKILL'), timeouts.demoStopMs);
  await exited;
  clearTimeout(timer);
}

function apiOf(access: DemoAccess): ControlPlaneApi {
  return new ControlPlaneApi({ apiUrl: access.apiUrl, token: access.operatorToken, timeoutMs: 30_000 });
}

async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** What an operator would have done during a rollout, so that each page has something to show. */
async function operate(access: DemoAccess): Promise<void> {
  const api = apiOf(access);
  await api.setTraffic({ defaultPercent: 20, integrations: { 'bank-a': 80, 'bank-b': 60, 'bank-c': 40, 'bank-d': 25 } });
  await api.setParallelism({ candidate: 12 });
}

async function waitForLiveData(access: DemoAccess): Promise<void> {
  const api = apiOf(access);
  const startedAt = Date.now();
  await until('latency slots with ratios, and worker figures', timeouts.liveDataMs, async () => {
    const series = await api.latencySeries('10m');
    const workers = await api.workers();
    const withRatios = series.slots.filter((slot) => Object.values(slot.integrations).some((ratio) => ratio.p50 !== null)).length;
    log(
      `  ${Math.round((Date.now() - startedAt) / 1000)} s: ${series.slots.length} latency slots (${withRatios} with ratios), ${workers.filter((w) => w.stats).length}/${workers.length} workers reporting`,
    );
    return withRatios >= 5 && workers.every((w) => w.stats) && Date.now() - startedAt >= timeouts.minimumLiveMs ? true : undefined;
  });
}

async function rollBackOneAndProfile(access: DemoAccess): Promise<void> {
  const api = apiOf(access);
  await api.rollback({ integration: 'bank-c', reason: 'p95 ratio above 1.5 on bank-c' });
  const candidate = (await api.workers()).find((w) => w.cluster === 'candidate');
  if (!candidate) throw new Error('no candidate worker to profile');
  const started = await api.call<ProfileRecord>('POST', '/profiles', { workerId: candidate.workerId, durationMs: 3000 });
  await until('the profile', timeouts.profileMs, async () =>
    (await api.call<ProfileRecord>('GET', `/profiles/${started.profileId}`)).status === 'done' ? true : undefined,
  );
}

/** A step of the rollout through the UI: bank-d from 25% to 30%, until every balancer has it. */
async function shiftTraffic(page: Page): Promise<void> {
  await goTo(page, 'Traffic');
  await page.getByLabel('bank-d: percent on the candidate').fill('30');
  await page.getByRole('button', { name: 'Review 1 change…' }).click();
  await page.getByRole('dialog', { name: 'Change the traffic split?' }).getByRole('button', { name: 'Apply' }).click();
  await page.getByTestId('traffic-propagated').waitFor({ timeout: 20_000 });
}

/** The CPU profiles panel of the Workers page (below the fold of workers.png), a frame hovered. */
async function saveFlameGraph(page: Page): Promise<void> {
  const panel = page.locator('section[aria-labelledby="profiles-title"]');
  const graph = page.getByRole('figure', { name: 'Flame graph of CPU time' });
  await graph.scrollIntoViewIfNeeded();
  // A wide frame of named JavaScript a few calls deep, so that its tooltip and details show.
  const frames = graph.locator('g.frame');
  const deepNamedWide = await frames.evaluateAll((elements) =>
    elements.findIndex(
      (g) =>
        /^[A-Za-z_$]/.test(g.getAttribute('name') ?? '') &&
        Number(g.querySelector('rect')?.getAttribute('width')) > 100 &&
        (g as SVGGElement).transform.baseVal[0]!.matrix.f >= 3 * 18,
    ),
  );
  await frames.nth(Math.max(deepNamedWide, 0)).hover();
  await page.waitForTimeout(500);
  // A clip of the whole page (in its coordinates), so that nothing scrolls and the tooltip stays.
  const box = await panel.boundingBox();
  if (!box) throw new Error('the CPU profiles panel is not on screen');
  const scrollYPx = await page.evaluate(() => window.scrollY);
  await page.screenshot({ path: path.join(outputDirectory, 'flame-graph.png'), fullPage: true, clip: { ...box, y: box.y + scrollYPx } });
  log('  flame-graph.png');
}

/**
 * The overview (wide and narrow), traffic and parallelism first, in the steady state; then a
 * rollback of one integration and a CPU profile, and the pages that show them.
 */
async function screenshot(access: DemoAccess): Promise<void> {
  const browser = await launchBrowser();
  try {
    fs.mkdirSync(outputDirectory, { recursive: true });
    const wide = await openPage(browser, { widthPx: 1280, heightPx: 800 });
    const narrow = await openPage(browser, { widthPx: 420, heightPx: 900 });
    await signIn(wide.page, access.uiUrl, access.operatorToken);
    await signIn(narrow.page, access.uiUrl, access.operatorToken);
    const save = async (page: Page, title: string, file: string, fullPage = false) => {
      const { ready } = pages.find((p) => p.title === title)!;
      await goTo(page, title);
      await ready(page);
      // Live figures and the polled lists settle.
      await page.waitForTimeout(2500);
      await page.screenshot({ path: path.join(outputDirectory, file), fullPage });
      log(`  ${file}`);
    };
    await save(wide.page, 'Overview', 'overview.png');
    await save(narrow.page, 'Overview', 'overview-narrow.png');
    await shiftTraffic(wide.page);
    await wide.page.screenshot({ path: path.join(outputDirectory, 'traffic.png') });
    log('  traffic.png');
    await save(wide.page, 'Parallelism', 'parallelism.png');
    await rollBackOneAndProfile(access);
    await save(wide.page, 'Rollback', 'rollback.png');
    await save(wide.page, 'Workers', 'workers.png');
    await saveFlameGraph(wide.page);
    await save(wide.page, 'Audit', 'audit.png');
    await apiOf(access).call('POST', '/rollouts', demoRolloutPlan);
    await new Promise((resolve) => setTimeout(resolve, timeouts.rolloutRunMs));
    await save(wide.page, 'Rollouts', 'rollouts.png', true);
    const problems = [...unexpectedProblems(wide), ...unexpectedProblems(narrow)];
    if (problems.length > 0) throw new Error(`the pages reported problems:\n${problems.join('\n')}`);
  } finally {
    await browser.close();
  }
}

async function main(): Promise<number> {
  if (!fs.existsSync(demoCli)) throw new Error(`no ${demoCli}: run npm run build first`);
  log(`starting the demo: node ${path.relative(repoRoot, demoCli)} ${demoArgs.join(' ')}`);
  const demo = startDemo();
  const stopOnSignal = () => void stopDemo(demo.child).then(() => process.exit(130));
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    const access = await demo.access;
    log(`demo ready: UI ${access.uiUrl}`);
    await operate(access);
    log('waiting for live data...');
    await waitForLiveData(access);
    log(`saving screenshots to ${path.relative(repoRoot, outputDirectory)}/`);
    await screenshot(access);
    return 0;
  } catch (error) {
    process.stderr.write(`screenshots: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  } finally {
    log('stopping the demo (SIGINT)...');
    await stopDemo(demo.child);
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`screenshots: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);

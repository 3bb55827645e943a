/**
 * Debian's Chromium driven by playwright-core, for the browser tests and the screenshot script.
 * No browser is downloaded: `.ci/run` installs the chromium package when it is missing.
 */
import * as fs from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/** HEADROOM_CHROMIUM points elsewhere (e.g. a Chromium of another distribution). */
export const chromiumPath = process.env.HEADROOM_CHROMIUM ?? '/usr/bin/chromium';

const launchArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** Longest any single browser step (a click, a wait for an element) may take. */
export const stepTimeoutMs = 10_000;

export async function launchBrowser(): Promise<Browser> {
  if (!fs.existsSync(chromiumPath)) {
    throw new Error(`no Chromium at ${chromiumPath}: install Debian's (apt-get install -y chromium) or set HEADROOM_CHROMIUM`);
  }
  return chromium.launch({ executablePath: chromiumPath, args: launchArgs, timeout: 30_000 });
}

export interface WatchedPage {
  page: Page;
  /**
   * What went wrong in the page: uncaught exceptions, console errors (CSP violations among
   * them) and dialogs (alert() from injected script). Failed API calls the app shows are
   * console errors too ("Failed to load resource"): `unexpectedProblems` leaves those out.
   */
  problems: string[];
}

/** A new page in a context of its own (its own sessionStorage), `widthPx` x `heightPx`. */
export async function openPage(browser: Browser, viewport: { widthPx: number; heightPx: number } = { widthPx: 1280, heightPx: 800 }): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport: { width: viewport.widthPx, height: viewport.heightPx }, acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(stepTimeoutMs);
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.type()} ${dialog.message()}`);
    void dialog.dismiss();
  });
  return { page, problems };
}

/** Problems other than the browser's own note of an HTTP error status (which the app then shows). */
export function unexpectedProblems(watched: WatchedPage): string[] {
  return watched.problems.filter((problem) => !/Failed to load resource: the server responded with a status of (4|5)\d\d/.test(problem));
}

/** Signs in on the login page at `baseUrl` and waits for the overview. */
export async function signIn(page: Page, baseUrl: string, token: string): Promise<void> {
  await page.goto(baseUrl);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
}

/** Follows a link of the navigation bar and waits for the page's heading. */
export async function goTo(page: Page, title: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: title, exact: true }).click();
  await page.getByRole('heading', { name: title, level: 1 }).waitFor();
}

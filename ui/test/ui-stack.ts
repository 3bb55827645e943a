/**
 * The real system for the browser tests: Redis (a key prefix of its own), a real Unleash
 * (shared by a test file), the control plane serving the built UI, workers and balancers that
 * read their flags from Unleash; and Chromium. Everything stops when the test ends.
 */
import type { TestContext } from 'node:test';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Browser } from 'playwright-core';
import type { RunningUnleash } from '@headroom/unleash-local';
import type { ControlPlaneOptions } from '@headroom/control-plane';
import { startStack, type Stack } from '@headroom/testkit';
import { launchBrowser } from '../node/browser';

export { operatorToken, viewerToken } from '@headroom/testkit';

/** What `npm run build` (vite build) writes. */
export const uiDirectory = path.join(__dirname, '..', 'app');

export interface UiStack extends Stack {
  /** The control plane's address: the UI at /, the API at /api/v1. */
  baseUrl: string;
  browser: Browser;
}

export async function startUiStack(t: TestContext, unleash: RunningUnleash, options: Partial<ControlPlaneOptions> = {}): Promise<UiStack> {
  if (!fs.existsSync(path.join(uiDirectory, 'index.html'))) throw new Error(`no built UI in ${uiDirectory}: run npm run build`);
  // Figures often, so that live numbers show up quickly.
  const stack = await startStack(t, unleash, { uiDirectory, figuresIntervalMs: 300, ...options });
  const browser = await launchBrowser();
  t.after(() => browser.close());
  return Object.assign(stack, { baseUrl: stack.controlPlane.url, browser });
}

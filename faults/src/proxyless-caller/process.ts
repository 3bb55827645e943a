/**
 * The proxyless caller (cli.ts) as a process of the stack: on the stack's Redis and key prefix,
 * with its balancers' heartbeat timeout, followed by its "answers" lines.
 */
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { spawnReady, type ReadyProcess } from '@headroom/testkit';
import { heartbeatTimeoutMs, keyPrefix, readyTimeoutMs, type FaultStack } from '../stack';
import type { CallerAnswers } from './cli';

export type { CallerAnswers };

const cliPath = path.join(__dirname, 'cli.js');

export interface ProxylessCallerOptions {
  clientId: string;
  lanes: number;
  /** How long each task sleeps on its worker, in turn. @default [40, 60, 80, 100, 120] */
  sleepMs?: readonly number[];
  /** @default 200 */
  reportIntervalMs?: number;
}

export interface ProxylessCallerProcess {
  readonly clientId: string;
  readonly process: ReadyProcess;
  /** Its last "answers" line (zeros before the first). */
  latest(): CallerAnswers;
  /** Resolves once its counts satisfy `check` (at most `timeoutMs`, else rejects naming `what`). */
  until(what: string, timeoutMs: number, check: (answers: CallerAnswers) => boolean): Promise<CallerAnswers>;
}

/** Starts it and waits for its ready line; it is killed when the test ends, and dies with this process. */
export async function startProxylessCaller(t: TestContext, stack: FaultStack, options: ProxylessCallerOptions): Promise<ProxylessCallerProcess> {
  const process = await spawnReady(
    t,
    cliPath,
    [
      '--redis-url',
      stack.redisUrl,
      '--key-prefix',
      keyPrefix,
      '--client-id',
      options.clientId,
      '--lanes',
      String(options.lanes),
      '--heartbeat-timeout-ms',
      String(heartbeatTimeoutMs),
      '--report-interval-ms',
      String(options.reportIntervalMs ?? 200),
      ...(options.sleepMs ? ['--sleep-ms', options.sleepMs.join(',')] : []),
    ],
    readyTimeoutMs,
  );
  let latest: CallerAnswers = { event: 'answers', submitted: 0, ok: 0, failedByCode: {}, inFlight: 0, holdingSlots: 0, final: false };
  const unsubscribe = process.child.onEvent((event) => {
    if (event.event === 'answers') latest = event as unknown as CallerAnswers;
  });
  t.after(unsubscribe);
  return {
    clientId: options.clientId,
    process,
    latest: () => latest,
    until: (what, timeoutMs, check) =>
      new Promise((resolve, reject) => {
        if (check(latest)) return resolve(latest);
        const timer = setTimeout(() => {
          stop();
          reject(new Error(`proxyless caller ${options.clientId}: ${what} not within ${timeoutMs} ms; last counts ${JSON.stringify(latest)}`));
        }, timeoutMs);
        timer.unref();
        const off = process.child.onEvent((event) => {
          if (event.event === 'answers' && check(event as unknown as CallerAnswers)) {
            stop();
            resolve(event as unknown as CallerAnswers);
          }
        });
        const stop = () => {
          clearTimeout(timer);
          off();
        };
      }),
  };
}

#!/usr/bin/env node
/**
 * A caller process in proxyless mode, for the fault suite: it runs a proxyless client
 * (@headroom/client/proxyless: the balancer's logic in the caller, reserving through the ledger
 * and calling workers directly) and keeps `--lanes` demo tasks in flight, each lane sending its
 * next task when the last is answered, until it is stopped. Killing it with SIGKILL is the
 * proxyless counterpart of killing a balancer: the slots it held must come back by themselves.
 *
 * Tasks are shaped like the balancer case's load (process-faults.test.ts): one lane in four
 * USER_PRESENT, the rest BACKGROUND; each sleeps the next of --sleep-ms on the worker (demo
 * handlers, sim/src/handlers/demo.ts). One attempt per task (no client retry), so each answer
 * counts once. Ids are `<client id>-<seq>`, apart from the suite's own task ids.
 *
 * Prints JSON lines: {"event":"ready","address":"proxyless:<host>:<pid>","clientId":...} once it
 * is registered, then {"event":"answers",...} (CallerAnswers) every --report-interval-ms and once
 * more after a SIGTERM or SIGINT, when it stops sending, closes the client (its queued tasks are
 * answered HR_ERR_SHUTTING_DOWN, its running ones finish) and exits.
 */
import { z } from 'zod';
import { ConfigError, readOptions, settings, stopSignal, usageText, type OptionSpec } from '@headroom/common';
import { connectRedis, waitUntilReady } from '@headroom/fleet';
import { HeadroomClientError } from '@headroom/client';
import { createProxylessClient } from '@headroom/client/proxyless';
import { ClosedLoop } from '@headroom/sim';

/** Its counts, as printed in each "answers" line. */
export interface CallerAnswers {
  event: 'answers';
  submitted: number;
  ok: number;
  /** Answers that were errors, by code (the handler's or Headroom's). */
  failedByCode: Record<string, number>;
  /** Tasks sent and not answered yet. */
  inFlight: number;
  /** Of those, the ones past its queue: each holds a slot reserved in the ledger (or is reserving one). */
  holdingSlots: number;
  /** The last line, printed after it stopped sending and every answer came. */
  final: boolean;
}

const flags: readonly OptionSpec[] = [
  { key: 'redisUrl', flag: 'redis-url', env: 'REDIS_URL', valueName: 'URL', description: 'the ledger, as the stack gives it to its processes (required)' },
  { key: 'keyPrefix', flag: 'key-prefix', env: 'HEADROOM_KEY_PREFIX', valueName: 'PREFIX', description: 'ledger key prefix' },
  {
    key: 'clientId',
    flag: 'client-id',
    valueName: 'ID',
    description: "its id in the ledger and the balancer register (the client's balancerId)",
    defaultText: 'proxyless-caller-<pid>',
  },
  { key: 'lanes', flag: 'lanes', valueName: 'N', description: 'tasks kept in flight at once, 1..1000 (required)' },
  { key: 'sleepMs', flag: 'sleep-ms', valueName: 'MS,MS,...', description: 'how long each task sleeps on its worker, taken in turn' },
  { key: 'taskDeadlineMs', flag: 'task-deadline-ms', valueName: 'MS', description: 'deadline of each task from its submit' },
  {
    key: 'heartbeatTimeoutMs',
    flag: 'heartbeat-timeout-ms',
    valueName: 'MS',
    description: "a worker silent this long leaves the ledger: the stack's balancers' setting",
  },
  { key: 'reportIntervalMs', flag: 'report-interval-ms', valueName: 'MS', description: 'how often it prints its counts' },
];

const sleepList = z
  .string()
  .regex(/^\d{1,6}(,\d{1,6}){0,99}$/, 'expected up to 100 whole numbers of milliseconds separated by commas, e.g. 40,60,80')
  .transform((text) => text.split(',').map(Number));

const cliSchema = z
  .object({
    redisUrl: settings.redisUrl(),
    keyPrefix: settings.keyPrefix(),
    clientId: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,100}$/, 'expected 1-100 characters of A-Z, a-z, 0-9, ".", "_", "-"')
      .default(`proxyless-caller-${process.pid}`),
    lanes: settings.positiveInt(1000),
    sleepMs: sleepList.default([40, 60, 80, 100, 120]),
    taskDeadlineMs: settings.positiveInt(600_000).default(10_000),
    heartbeatTimeoutMs: settings.positiveInt(600_000).default(3000),
    reportIntervalMs: settings.positiveInt(60_000).default(200),
  })
  .strict();

function print(line: object): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** The integrations the lanes take in turn. */
const laneIntegrations = ['bank-a', 'bank-b', 'bank-c', 'bank-d'];

async function main(): Promise<void> {
  const parsed = readOptions(cliSchema, flags, process.argv.slice(2), process.env);
  if (parsed.help) {
    process.stdout.write(`${usageText('Usage: node faults/dist/src/proxyless-caller/cli.js --redis-url URL --lanes N [options]', flags, cliSchema)}\n`);
    return;
  }
  const config = parsed.config;
  const stopRequested = stopSignal();
  const redis = connectRedis(config.redisUrl);
  const subscriber = connectRedis(config.redisUrl, { enableOfflineQueue: true, enableAutoPipelining: false });
  await waitUntilReady(redis, config.redisUrl);
  const client = await createProxylessClient(
    { balancerId: config.clientId, heartbeatTimeoutMs: config.heartbeatTimeoutMs, ledger: { keyPrefix: config.keyPrefix }, retry: { maxAttempts: 1 } },
    { redis, subscriber },
  );

  const counts: CallerAnswers = { event: 'answers', submitted: 0, ok: 0, failedByCode: {}, inFlight: 0, holdingSlots: 0, final: false };
  const report = (final: boolean) => print({ ...counts, holdingSlots: counts.inFlight - client.stats().engine.queue.queued, final });
  const loop = new ClosedLoop({
    lanes: config.lanes,
    maxCalls: Number.MAX_SAFE_INTEGER,
    maxDurationMs: 10 * 60_000,
    call: async (seq, lane) => {
      counts.submitted++;
      counts.inFlight++;
      try {
        await client.submit({
          id: `${config.clientId}-${seq}`,
          key: `account-${seq}`,
          // Over four integrations: one may hold only half of a cluster's slots (the ledger's default limit).
          integration: laneIntegrations[lane % laneIntegrations.length]!,
          priority: lane % 4 === 0 ? 'USER_PRESENT' : 'BACKGROUND',
          payload: JSON.stringify({ sleepMs: config.sleepMs[seq % config.sleepMs.length] }),
          deadlineMs: config.taskDeadlineMs,
        });
        counts.ok++;
        return true;
      } catch (error) {
        const code = error instanceof HeadroomClientError ? error.code : 'UNKNOWN';
        counts.failedByCode[code] = (counts.failedByCode[code] ?? 0) + 1;
        return false;
      } finally {
        counts.inFlight--;
      }
    },
    // Back off a little after a failure rather than spin.
    pauseAfterMs: (ok) => (ok ? 0 : 25),
  });
  const reporter = setInterval(() => report(false), config.reportIntervalMs);
  reporter.unref();
  print({ event: 'ready', address: client.address, clientId: client.balancerId, lanes: config.lanes });

  await stopRequested;
  loop.stop();
  // Queued tasks are answered HR_ERR_SHUTTING_DOWN at once, running ones finish.
  await client.close();
  await loop.finished();
  clearInterval(reporter);
  report(true);
  redis.disconnect();
  subscriber.disconnect();
  process.exit(0);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`faults proxyless caller: ${error instanceof ConfigError ? error.message : error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(error instanceof ConfigError ? 2 : 1);
  });
}

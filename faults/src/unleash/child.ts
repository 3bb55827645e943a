#!/usr/bin/env node
/**
 * A real Unleash server as a process of its own, for the fault suite: stopping it is a real
 * outage (its connections go away), and starting another on the same port, schema and tokens is
 * a real return. (In one process, a second Unleash after the first stopped serves stale flags
 * to clients, so the suite never restarts Unleash in-process.)
 * Input: env HEADROOM_FAULTS_UNLEASH, JSON of UnleashServerOptions. Prints one JSON line
 * {"event":"ready","url":...} once serving; SIGTERM or SIGINT stops it.
 */
import { stopSignal } from '@headroom/common';
import { startUnleashServer, type UnleashServerOptions } from '@headroom/unleash-local';

export const unleashOptionsEnv = 'HEADROOM_FAULTS_UNLEASH';

async function main(): Promise<void> {
  const stopRequested = stopSignal();
  const options = JSON.parse(process.env[unleashOptionsEnv] ?? '') as UnleashServerOptions;
  const unleash = await startUnleashServer(options);
  process.stdout.write(`${JSON.stringify({ event: 'ready', url: unleash.url, port: unleash.port })}\n`);
  await stopRequested;
  await unleash.stop();
  process.exit(0);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`faults unleash: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  });
}

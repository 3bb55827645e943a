/**
 * Worker handlers (--handlers) for benchmarks that count a worker's GC pauses exactly: the
 * handlers of the module named by HEADROOM_BENCH_INNER_HANDLERS (default: the demo handlers) as
 * they are, and, in the same process, the totals of every GC pause served on the port named by
 * HEADROOM_BENCH_GC_TOTALS_PORT (see gc-totals.ts). Only the process that loads its handlers
 * counts: a worker that starts itself again with heap flags loads them once, there.
 */
import type { HandlerMap } from '@headroom/worker';
import { handlers as demoHandlers } from '@headroom/sim/handlers/demo';
import { gcTotalsPortEnv, innerHandlersEnv, serveGcTotals } from './gc-totals';

const port = Number(process.env[gcTotalsPortEnv]);
if (!Number.isInteger(port) || port <= 0)
  throw new Error(`${gcTotalsPortEnv} is ${JSON.stringify(process.env[gcTotalsPortEnv])}: name a free TCP port for the GC totals`);
serveGcTotals(port).catch((error: unknown) => {
  process.stderr.write(`gc-observing-handlers: could not serve the GC totals on port ${port}: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

function innerHandlers(): HandlerMap {
  const modulePath = process.env[innerHandlersEnv];
  if (!modulePath) return demoHandlers;
  const loaded = require(modulePath) as { handlers?: HandlerMap };
  if (!loaded.handlers) throw new Error(`${innerHandlersEnv}: ${modulePath} exports no \`handlers\``);
  return loaded.handlers;
}

export const handlers: HandlerMap = innerHandlers();

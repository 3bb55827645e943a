/**
 * The load generator, run as its own process (forked by LoadGenerator) so that sending calls
 * and timing answers never shares an event loop with the benchmark's orchestration.
 * argv[2]: the Targets as JSON. Then it runs the phases it is sent, one at a time.
 */
import type { CallTarget } from './call-target';
import { asTargets, asToGenerator, targetNames, type FromGenerator, type PhaseSpec, type PhaseResult, type TargetName } from './protocol';
import { closedLoop, openLoop } from './loops';
import { createTarget } from './targets';

const readyTimeoutMs = 10_000;

// A failed call is a figure here, counted by its code, and grpc-js joins a stack trace to every
// one: in a background spike the generator formatted 19,000 of them, 8% of its CPU (profiled),
// while its lag counts in every latency it times.
Error.stackTraceLimit = 0;

function send(message: FromGenerator): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  if (!process.send) throw new Error('load generator: start it with child_process.fork (it needs the IPC channel)');
  const targets = asTargets(process.argv[2]);
  const callTargets = new Map<TargetName, CallTarget>();
  for (const name of targetNames) {
    const target = createTarget(name, targets);
    if (target) callTargets.set(name, target);
  }
  await Promise.all([...callTargets.values()].map((target) => target.waitForReady(readyTimeoutMs)));

  const run = async (spec: PhaseSpec, stop: AbortSignal): Promise<PhaseResult> => {
    const target = callTargets.get(spec.target);
    if (!targetNames.includes(spec.target)) throw new Error(`unknown target ${JSON.stringify(spec.target)}: expected one of ${targetNames.join(', ')}`);
    const missing = { balancer: 'balancers', haproxy: 'an HAProxy', proxyless: "the ledger's Redis URL and key prefix", direct: 'workers' } satisfies Record<
      TargetName,
      string
    >;
    if (!target) throw new Error(`no ${spec.target} target: the generator was started without ${missing[spec.target]}`);
    return spec.kind === 'closed' ? closedLoop(target.call, spec) : openLoop(target.call, spec, stop);
  };
  // Phases run strictly one after another, even if the parent sent the next one early.
  let queue: Promise<void> = Promise.resolve();
  const stoppers = new Map<number, AbortController>();
  process.on('message', (raw: unknown) => {
    const message = asToGenerator(raw);
    if (!message) return;
    if (message.type === 'stop') return stoppers.get(message.id)?.abort();
    const stopper = new AbortController();
    stoppers.set(message.id, stopper);
    queue = queue.then(() =>
      run(message.spec, stopper.signal)
        .then(
          (result) => send({ type: 'result', id: message.id, result }),
          (error: unknown) => send({ type: 'failed', id: message.id, message: error instanceof Error ? error.message : String(error) }),
        )
        .finally(() => stoppers.delete(message.id)),
    );
  });
  // The benchmark went away (finished, crashed, or Ctrl-C): nothing left to do.
  process.on('disconnect', () => {
    for (const target of callTargets.values()) target.close();
    process.exit(0);
  });
  send({ type: 'ready' });
}

main().catch((error: unknown) => {
  process.stderr.write(`load generator: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

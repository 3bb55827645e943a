/**
 * What the demo's workers run and its load generator sends. `bank` (the default): the bank
 * handlers (sim/src/handlers/bank.ts) calling the bank simulator (sim/src/bank), which the
 * demo runs as a child; `sleep`: the demo handlers (sim/src/handlers/demo.ts), which only wait.
 */
import { defaultIntegrations, type WeightedIntegration } from '@headroom/sim';
import type { NodeProcess } from '@headroom/testkit';
import type { SpawnChild } from './control';
import type { DemoConfig } from './options';
import { say, write } from './terminal';

/**
 * The simulator's banks, from fast (bank-a) to slow with a heavy tail (bank-d), and the
 * load generator's weights: most tasks go to the fast ones, as with real banks.
 */
const bankIntegrations: readonly WeightedIntegration[] = Object.freeze([
  { name: 'bank-a', weight: 3 },
  { name: 'bank-b', weight: 2 },
  { name: 'bank-c', weight: 1 },
  { name: 'bank-d', weight: 1 },
]);

const scripts = {
  bankSimulator: require.resolve('@headroom/sim/bank-simulator'),
  bankHandlers: require.resolve('@headroom/sim/handlers/bank'),
  sleepHandlers: require.resolve('@headroom/sim/handlers/demo'),
};
/** bankUrlEnv of handlers/bank.ts; importing that module would build its handlers from this process's env. */
const bankUrlEnv = 'HEADROOM_BANK_URL';
const bankSimulatorReadyMs = 15_000;

export class DemoWorkload {
  readonly integrations: readonly WeightedIntegration[];
  readonly handlersScript: string;
  /** The bank simulator (bank workload only), stopped after the workers. */
  bankSimulator: NodeProcess | undefined;
  private bankUrl: string | undefined;

  constructor(
    private readonly config: DemoConfig,
    private readonly spawn: SpawnChild,
  ) {
    const bank = config.workload === 'bank';
    this.integrations = bank ? bankIntegrations : defaultIntegrations.map((name) => ({ name, weight: 1 }));
    this.handlersScript = bank ? scripts.bankHandlers : scripts.sleepHandlers;
  }

  /** The control plane gets one share (and one rollback) per integration. */
  get integrationNames(): string[] {
    return this.integrations.map((integration) => integration.name);
  }

  /** The load generator's --integrations: "bank-a:3,bank-b:2,...". */
  get loadgenIntegrations(): string {
    return this.integrations.map(({ name, weight }) => `${name}:${weight}`).join(',');
  }

  /** Env the workers' handlers read: the bank simulator's URL. */
  get workerEnv(): Record<string, string> {
    return this.bankUrl === undefined ? {} : { [bankUrlEnv]: this.bankUrl };
  }

  /** Starts what the handlers call, if anything: the bank simulator on a free port. */
  async startUpstream(): Promise<void> {
    if (this.config.workload !== 'bank') return;
    write(`starting bank simulator (time scale ${this.config.bankTimeScale})... `);
    const child = this.spawn('bank-sim', scripts.bankSimulator, ['--port', '0', '--time-scale', String(this.config.bankTimeScale)]);
    this.bankSimulator = child;
    const ready = await child.waitForEvent('ready', bankSimulatorReadyMs);
    this.bankUrl = String(ready.url);
    const banks = Array.isArray(ready.banks) ? ready.banks.join(', ') : '?';
    say(`ok (${this.bankUrl}, banks ${banks}, pid ${child.pid})`);
  }

  /** The bank simulator's address and how to make a bank misbehave, printed once everything runs. */
  printAccess(): void {
    if (this.bankUrl === undefined) return;
    say(`Bank sim:      ${this.bankUrl}   (GET /banks, /incidents; kinds latency-spike, slow, outage)`);
    say(
      `  e.g. make bank-b 4x slower: curl -X POST -H 'content-type: application/json' -d '{"bank":"bank-b","kind":"slow","factor":4}' ${this.bankUrl}/incidents`,
    );
    say(`       for the candidate only: add "cluster":"candidate" (the bank handlers name their worker's cluster in each call)`);
    say(`       then watch the Overview name it in trouble, and on the Limits page its tasks in flight against its limit`);
    say(`       (set the limit to auto there, and the control plane lowers it while the bank is slow)`);
    say(`       and end it:            curl -X DELETE ${this.bankUrl}/incidents`);
  }
}

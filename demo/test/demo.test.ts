import { after, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ControlPlaneApi, ControlPlaneApiError, deleteKeysUnder, freePort, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { Ledger, connectRedis } from '@headroom/fleet';
import type { Redis } from 'ioredis';
import { startTestUnleash, testDatabase, type TestUnleash } from '@headroom/unleash-local';
import type { TrafficView } from '@headroom/control-plane';

/**
 * One in-process Unleash for the tests that give the demo one (UNLEASH_URL): a second started in
 * this process after the first stopped met the first's timers still firing on its closed pool.
 */
let givenUnleash: Promise<TestUnleash> | undefined;
const sharedUnleash = () => (givenUnleash ??= startTestUnleash());
after(async () => (await givenUnleash)?.stop());

const demoCli = path.join(__dirname, '..', 'src', 'cli.js');
/** demo/dist/test -> the repository root, where the printed join commands are meant to run. */
const repoRoot = path.join(__dirname, '..', '..', '..');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the demo launcher to its end; kills it (and so, through exit-with-parent, its children)
 * on timeout. `onStdout` sees the output so far each time more arrives, while the demo runs.
 */
function runDemo(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number; onStdout?: (stdout: string, child: ChildProcess) => void } = {},
): Promise<Run> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [demoCli, ...args], { env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      options.onStdout?.(stdout, child);
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`demo still running after ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Every "pid N" the demo printed. */
const printedPids = (stdout: string) => [...stdout.matchAll(/pid (\d+)/g)].map((match) => Number(match[1]));

/** Command lines of running processes that contain `text` (PostgreSQL's carry its data directory). */
function processesMentioning(text: string): string[] {
  return execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes(text));
}

/** "done N" of each status line, by cluster. */
function completedByCluster(stdout: string): Record<string, number[]> {
  const done: Record<string, number[]> = {};
  for (const match of stdout.matchAll(/^\s+(baseline|candidate)\s+\d+ workers, capacity \d+, in flight \d+, free -?\d+\s+\| done (\d+)/gm)) {
    (done[match[1]!] ??= []).push(Number(match[2]));
  }
  return done;
}

/** "done N" of the load generator's totals at the end, by cluster. */
function totalCompleted(stdout: string): Record<string, number> {
  const totals = stdout.slice(stdout.indexOf('load in total'));
  return Object.fromEntries([...totals.matchAll(/^ {2}(baseline|candidate)\s+done (\d+)/gm)].map((match) => [match[1]!, Number(match[2])]));
}

/** The commands the demo printed for joining its run, by what they start; undefined until all three are printed. */
function joinCommands(stdout: string): { balancer: string; baseline: string; candidate: string } | undefined {
  const printed = /^Join this run: .*\n {2}balancer: +(.+)\n {2}baseline worker: +(.+)\n {2}candidate worker: +(.+)\n/m.exec(stdout);
  if (!printed) return undefined;
  const [balancer, baseline, candidate] = printed.slice(1) as [string, string, string];
  return { balancer, baseline, candidate };
}

/**
 * A printed command, run as a user would paste it: by bash (a usual interactive shell, which
 * runs a lone command in its own place, so the exit code is node's), in the repository root,
 * in a process group of its own as a terminal's foreground job.
 */
class PastedCommand {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  output = '';
  private readonly events: Record<string, unknown>[] = [];
  private stopping: Promise<number | null> | undefined;

  constructor(readonly command: string) {
    this.child = spawn(command, { shell: '/bin/bash', cwd: repoRoot, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.child.once('close', (code) => resolve(code)));
    let partial = '';
    this.child.stdout!.on('data', (chunk: Buffer) => {
      this.output += chunk.toString();
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          if (typeof parsed.event === 'string') this.events.push(parsed);
        } catch {
          // a log line
        }
      }
    });
    this.child.stderr!.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
  }

  /** Its {"event":"ready",...} line. */
  async ready(timeoutMs: number): Promise<Record<string, unknown>> {
    const deadlineMs = Date.now() + timeoutMs;
    while (Date.now() < deadlineMs) {
      const ready = this.events.find((event) => event.event === 'ready');
      if (ready) return ready;
      if (this.child.exitCode !== null || this.child.signalCode !== null) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`not ready within ${timeoutMs} ms: ${this.command}\n${this.output}`);
  }

  /** Whether any process of its group (node, and anything it started) still runs. */
  get groupRunning(): boolean {
    return isRunning(-this.child.pid!);
  }

  /**
   * Ctrl-C, as the user would press it in its terminal: SIGINT to the whole group; SIGKILL if
   * it still runs `graceMs` later. Resolves with the exit code. Idempotent.
   */
  stop(graceMs: number): Promise<number | null> {
    this.stopping ??= (async () => {
      this.signalGroup('SIGINT');
      const timer = setTimeout(() => this.signalGroup('SIGKILL'), graceMs);
      const code = await this.exited;
      clearTimeout(timer);
      return code;
    })();
    return this.stopping;
  }

  private signalGroup(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.child.pid!, signal);
    } catch {
      // the group is gone
    }
  }
}

/** A joined worker drains for up to 10 s (the demo's --drain-timeout-ms). */
const joinedStopMs = 15_000;

interface JoinCheck {
  balancersAtStart: string[];
  joinedBalancer: { balancerId: string; ackedVersion: number | null; upToDate: boolean };
  overrideVersion: number;
  joinedWorkers: { workerId: string; cluster: string }[];
  exitCodes: (number | null)[];
  balancersAfter: string[];
  workersAfter: string[];
  leftRunning: string[];
  /** From running the commands until the control plane saw all three. */
  joinedAfterMs: number;
}

/**
 * Runs the printed join commands exactly as printed, waits until the control plane sees the
 * extra balancer (acknowledging the current override) and the extra workers in their clusters,
 * then stops them with Ctrl-C.
 */
async function joinTheRun(commands: { balancer: string; baseline: string; candidate: string }, apiUrl: string, token: string): Promise<JoinCheck> {
  const api = new ControlPlaneApi({ apiUrl, token, timeoutMs: 5000 });
  const balancersAtStart = (await api.balancers()).map((b) => b.balancerId);
  const startedAtMs = Date.now();
  const pasted = [commands.balancer, commands.baseline, commands.candidate].map((command) => new PastedCommand(command));
  try {
    const [balancerReady, baselineReady, candidateReady] = await Promise.all(pasted.map((command) => command.ready(30_000)));
    const balancerId = String(balancerReady!.balancerId);
    const workerIds = [String(baselineReady!.workerId), String(candidateReady!.workerId)];
    let joinedBalancer: JoinCheck['joinedBalancer'] | undefined;
    let joinedWorkers: JoinCheck['joinedWorkers'] = [];
    let overrideVersion = -1;
    const deadlineMs = Date.now() + 20_000;
    while (Date.now() < deadlineMs) {
      const [balancers, workers, traffic] = await Promise.all([api.balancers(), api.workers(), api.traffic()]);
      overrideVersion = traffic.override?.version ?? -1;
      joinedBalancer = balancers.find((b) => b.balancerId === balancerId);
      joinedWorkers = workers.filter((w) => workerIds.includes(w.workerId)).map(({ workerId, cluster }) => ({ workerId, cluster }));
      if (joinedBalancer?.ackedVersion === overrideVersion && joinedWorkers.length === 2) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    assert.ok(joinedBalancer, `the joined balancer ${balancerId} is not in /balancers:\n${pasted[0]!.output}`);
    const joinedAfterMs = Date.now() - startedAtMs;
    const exitCodes = await Promise.all(pasted.map((command) => command.stop(joinedStopMs)));
    const [balancers, workers] = await Promise.all([api.balancers(), api.workers()]);
    return {
      balancersAtStart,
      joinedBalancer,
      overrideVersion,
      joinedWorkers: joinedWorkers.sort((a, b) => a.cluster.localeCompare(b.cluster)),
      exitCodes,
      balancersAfter: balancers.map((b) => b.balancerId).filter((id) => id === balancerId),
      workersAfter: workers.map((w) => w.workerId).filter((id) => workerIds.includes(id)),
      leftRunning: pasted.filter((command) => command.groupRunning).map((command) => command.command),
      joinedAfterMs,
    };
  } finally {
    // Stopped gently on failure too, so that the workers leave the ledger.
    await Promise.all(pasted.map((command) => command.stop(joinedStopMs)));
  }
}

/** What the test learns from the control plane's API while the demo runs. */
interface ApiCheck {
  operatorReads: TrafficView;
  viewerReads: TrafficView;
  viewerChangeRefused: unknown;
  noTokenRefused: unknown;
}

async function checkApi(apiUrl: string, operatorToken: string, viewerToken: string): Promise<ApiCheck> {
  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => 'accepted',
      (error: unknown) => error,
    );
  const operator = new ControlPlaneApi({ apiUrl, token: operatorToken, timeoutMs: 5000 });
  const viewer = operator.withToken(viewerToken);
  return {
    operatorReads: await operator.traffic(),
    viewerReads: await viewer.traffic(),
    viewerChangeRefused: await refusal(viewer.setTraffic({ defaultPercent: 90 })),
    noTokenRefused: await refusal(operator.withToken('not-a-token-of-this-run').traffic()),
  };
}

/**
 * What a person opening the printed UI address sees, polled until the simulated workload shows:
 * the page, both clusters finishing tasks, every worker's report, and a charted latency slot.
 */
async function waitForLiveData(
  uiUrl: string,
  apiUrl: string,
  token: string,
  startedAtMs: number,
  withinMs: number,
): Promise<{ page: string; afterMs: number }> {
  const page = await fetch(uiUrl);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /text\/html/);
  const html = await page.text();
  const api = new ControlPlaneApi({ apiUrl, token, timeoutMs: 5000 });
  while (Date.now() - startedAtMs < withinMs) {
    const [clusters, workers, series] = await Promise.all([api.clusters(), api.workers(), api.latencySeries('1m')]);
    const busy = clusters.every((cluster) => cluster.tasksPerSecond > 0);
    const reported = workers.length === 3 && workers.every((worker) => worker.stats !== null);
    const charted = series.slots.some((slot) => slot.baseline.tasksPerSecond > 0 && slot.candidate.tasksPerSecond > 0);
    if (busy && reported && charted) return { page: html, afterMs: Date.now() - startedAtMs };
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  throw new Error(`no live data within ${withinMs} ms of the start`);
}

test(
  'npm start runs the whole system with its own Unleash, the control plane, the UI, 2 balancers and the bank simulator; live data within a minute; the printed commands join a balancer and a worker of each cluster; Ctrl-C leaves nothing behind',
  { timeout: 180_000 },
  async (t) => {
    const keyPrefix = uniquePrefix('demo');
    const [port, controlPlanePort] = [await freePort(), await freePort()];
    const redis = connectRedis(testRedisUrl) as Redis;
    t.after(async () => {
      await deleteKeysUnder(redis, keyPrefix);
      redis.disconnect();
    });
    let apiCheck: Promise<ApiCheck> | undefined;
    let liveData: Promise<{ page: string; afterMs: number }> | undefined;
    let joinCheck: Promise<JoinCheck> | undefined;
    const startedAtMs = Date.now();
    const run = await runDemo(
      [
        '--balancer-port',
        String(port),
        '--control-plane-port',
        String(controlPlanePort),
        '--candidate-percent',
        '30',
        '--key-prefix',
        keyPrefix,
        '--redis-url',
        testRedisUrl,
        '--baseline-workers',
        '2',
        '--candidate-workers',
        '1',
        '--candidate-parallelism',
        '4',
        '--status-interval-s',
        '2',
      ],
      {
        timeoutMs: 170_000,
        onStdout: (stdout, child) => {
          // "Status every ..." ends what the demo prints at start.
          const printed = /^Admin UI: +(\S+) .*\nControl plane: (\S+) .*\n {2}operator token: (\S+) .*\n {2}viewer token: +(\S+) [\s\S]*^Status every /m.exec(
            stdout,
          );
          if (!printed || apiCheck) return;
          const [uiUrl, apiUrl, operator, viewer] = printed.slice(1) as [string, string, string, string];
          apiCheck = checkApi(apiUrl, operator, viewer);
          // Then the operator waits for live data, joins a balancer and two workers with the
          // printed commands, stops them, and presses Ctrl-C: SIGINT to the launcher (its
          // children run in groups of their own).
          liveData = waitForLiveData(uiUrl, apiUrl, viewer, startedAtMs, 60_000);
          const commands = joinCommands(stdout);
          const done = commands ? (joinCheck = liveData.then(() => joinTheRun(commands, apiUrl, viewer))) : liveData;
          done.finally(() => child.kill('SIGINT')).catch(() => undefined);
        },
      },
    );
    const output = `${run.stdout}\n${run.stderr}`;
    assert.equal(run.code, 0, output);
    assert.match(run.stdout, new RegExp(`Ledger key prefix: ${keyPrefix}`));
    assert.match(run.stdout, /starting Redis\.\.\. ok/);
    const dataDir = /starting Unleash \(embedded PostgreSQL, data in (\S+);.*\.\.\. ok \(http:\/\/127\.0\.0\.1:\d+, pid \d+; PostgreSQL pid \d+\)/.exec(
      run.stdout,
    )?.[1];
    assert.ok(dataDir, output);
    assert.match(run.stdout, new RegExp(`starting control plane\\.\\.\\. ready at http://127\\.0\\.0\\.1:${controlPlanePort}/api/v1`));
    assert.match(
      run.stdout,
      /setting the candidate share to 30% .*\.\.\. ok \(flag headroom\.candidate-cluster: bank-a 30%, bank-b 30%, bank-c 30%, bank-d 30%, others 30%\)\n/,
    );
    const bankSimulator =
      /starting bank simulator \(time scale [\d.]+\)\.\.\. ok \((http:\/\/127\.0\.0\.1:\d+), banks bank-a, bank-b, bank-c, bank-d, pid (\d+)\)\n/.exec(
        run.stdout,
      );
    assert.ok(bankSimulator, output);
    assert.match(run.stdout, new RegExp(`^Bank sim: +${bankSimulator[1]} .*\n.*curl -X POST .*"kind":"slow".* ${bankSimulator[1]}/incidents$`, 'm'));
    assert.match(run.stdout, /baseline worker 2\/2 ready/);
    assert.match(run.stdout, /candidate worker 1\/1 ready/);
    // Two balancers by default, the first on --balancer-port; the load generator sends to both.
    assert.match(run.stdout, new RegExp(`starting 2 balancers .*\\.\\.\\. ok \\(127\\.0\\.0\\.1:${port}, pid \\d+; 127\\.0\\.0\\.1:\\d+, pid \\d+\\)\n`));
    assert.match(run.stdout, new RegExp(`^Balancers: +127\\.0\\.0\\.1:${port}, 127\\.0\\.0\\.1:\\d+ `, 'm'));

    // The control plane answered while the demo ran, with the split the demo set through it.
    assert.ok(apiCheck, `the demo printed no control plane address and tokens:\n${output}`);
    const api = await apiCheck;
    for (const view of [api.operatorReads, api.viewerReads]) {
      assert.equal(view.flag.name, 'headroom.candidate-cluster');
      assert.equal(view.flag.enabled, true);
      assert.equal(view.flag.defaultPercent, 30);
      assert.deepEqual(view.effectivePercent, { default: 30, integrations: { 'bank-a': 30, 'bank-b': 30, 'bank-c': 30, 'bank-d': 30 } });
    }
    assert.ok(api.viewerChangeRefused instanceof ControlPlaneApiError && api.viewerChangeRefused.code === 'HR_ERR_FORBIDDEN', String(api.viewerChangeRefused));
    assert.ok(api.noTokenRefused instanceof ControlPlaneApiError && api.noTokenRefused.code === 'HR_ERR_UNAUTHENTICATED', String(api.noTokenRefused));

    // The UI came up with live data from the simulated workload within a minute of the start.
    assert.ok(liveData, output);
    const live = await liveData;
    assert.match(live.page, /<script type="module"[^>]* src="\/assets\/[^"]+\.js"/);
    t.diagnostic(`live data in the UI's API ${(live.afterMs / 1000).toFixed(1)} s after the start`);

    // The printed commands carry everything a joiner needs, paths from the repository root, and no fixed port.
    const commands = joinCommands(run.stdout);
    assert.ok(commands, `the demo printed no commands to join its run:\n${output}`);
    const unleashUrl = /^Unleash: +(\S+)/m.exec(run.stdout)?.[1];
    for (const command of Object.values(commands)) {
      // The client token is read from a file of this run's when the command runs, never printed.
      assert.match(command, /^UNLEASH_CLIENT_TOKEN="\$\(cat \/\S+\/unleash-client-token\)" /);
      assert.ok(command.includes(` --unleash-url ${unleashUrl} --key-prefix ${keyPrefix} --redis-url ${testRedisUrl}`), command);
    }
    assert.match(commands.balancer, / node balancer\/dist\/src\/cli\.js --port 0 --kept-for-user-present-share 0\.1 /);
    assert.match(
      commands.baseline,
      new RegExp(
        ` HEADROOM_BANK_URL=${bankSimulator[1]} node worker/dist/src/cli\\.js --port 0 --cluster baseline --handlers sim/dist/src/handlers/bank\\.js --max-parallelism 1 `,
      ),
    );
    assert.match(
      commands.candidate,
      new RegExp(
        ` HEADROOM_BANK_URL=${bankSimulator[1]} node worker/dist/src/cli\\.js --port 0 --cluster candidate --handlers sim/dist/src/handlers/bank\\.js --max-parallelism 4 `,
      ),
    );

    // Run as printed, they joined: the balancer acknowledged the current override, each worker serves in its cluster.
    assert.ok(joinCheck, output);
    const join = await joinCheck;
    assert.equal(join.balancersAtStart.length, 2, `the demo runs 2 balancers: ${join.balancersAtStart.join(', ')}`);
    assert.ok(join.overrideVersion > 0, 'the control plane wrote an override at start');
    assert.equal(join.joinedBalancer.ackedVersion, join.overrideVersion);
    assert.equal(join.joinedBalancer.upToDate, true);
    assert.deepEqual(
      join.joinedWorkers.map((worker) => worker.cluster),
      ['baseline', 'candidate'],
    );
    // Ctrl-C stops them cleanly: the balancer leaves the register, the workers the ledger, no process is left.
    assert.deepEqual(join.exitCodes, [0, 0, 0]);
    assert.deepEqual(join.balancersAfter, []);
    assert.deepEqual(join.workersAfter, []);
    assert.deepEqual(join.leftRunning, []);
    t.diagnostic(`the printed commands joined ${(join.joinedAfterMs / 1000).toFixed(1)} s after they were run`);

    // The balancer routes by the flag: both clusters got work, done by the bank handlers.
    const done = completedByCluster(run.stdout);
    for (const cluster of ['baseline', 'candidate']) {
      assert.ok(
        (done[cluster] ?? []).some((n) => n > 0),
        `${cluster} completed no tasks:\n${output}`,
      );
    }
    assert.doesNotMatch(run.stdout, /HR_ERR_INVALID_PAYLOAD|HR_ERR_UPSTREAM_REJECTED/, "the bank handlers take the load generator's tasks");
    assert.match(
      run.stdout,
      /stopping \(SIGINT; Ctrl-C again to kill everything at once\)\n {2}load generator\.\.\. ok[\s\S]* {2}2 balancers\.\.\. ok\n {2}3 workers \(draining\)\.\.\. ok\n {2}bank simulator\.\.\. ok\n {2}control plane\.\.\. ok\n {2}ledger: [^\n]*\n {2}Unleash and its PostgreSQL\.\.\. ok\nstopped\n/,
    );
    assert.match(run.stdout, new RegExp(`ledger: no workers left under ${keyPrefix}`));

    // Nothing outlives the demo: Unleash, PostgreSQL, control plane, 2 balancers, bank simulator, 3 workers, load generator.
    const pids = printedPids(run.stdout);
    assert.equal(pids.length, 10, run.stdout);
    assert.ok(pids.includes(Number(bankSimulator[2])));
    assert.deepEqual(pids.filter(isRunning), [], 'no process outlives the demo');
    assert.deepEqual(processesMentioning(dataDir), [], 'no PostgreSQL process is left');
    assert.equal(fs.existsSync(dataDir), false, 'the PostgreSQL data directory is deleted');

    if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
    const ledger = new Ledger(redis, { keyPrefix });
    for (const cluster of ['baseline', 'candidate']) assert.deepEqual((await ledger.snapshot(cluster)).workers, []);
  },
);

test(
  'a given Unleash (UNLEASH_URL) is used and left running; without Redis a private redis-server is started and stopped; --workload sleep needs no bank simulator',
  { timeout: 60_000 },
  async (t) => {
    const unleash = await sharedUnleash();
    const nothingThere = `redis://127.0.0.1:${await freePort()}`;
    // With a given Unleash the control plane's audit log needs a PostgreSQL too: a database of this test's own.
    const database = await testDatabase('hr_demo');
    t.after(() => database.drop());
    const env = {
      ...process.env,
      UNLEASH_URL: unleash.url,
      UNLEASH_ADMIN_TOKEN: unleash.adminToken,
      UNLEASH_CLIENT_TOKEN: unleash.clientToken,
      HEADROOM_DATABASE_URL: database.url,
    };
    const run = await runDemo(
      [
        '--duration-s',
        '2',
        '--balancer-port',
        '0',
        '--control-plane-port',
        '0',
        '--candidate-percent',
        '100',
        '--baseline-workers',
        '2',
        '--candidate-workers',
        '1',
        '--redis-url',
        nothingThere,
        '--workload',
        'sleep',
      ],
      { env, timeoutMs: 50_000 },
    );
    const output = `${run.stdout}\n${run.stderr}`;
    assert.equal(run.code, 0, output);
    assert.ok(/starting a private .*redis-server\.\.\. ok \(redis:\/\/127\.0\.0\.1:\d+, pid (\d+)\)/.test(run.stdout), output);
    assert.match(run.stdout, new RegExp(`checking Unleash at ${unleash.url}\\.\\.\\. ok`));
    assert.doesNotMatch(run.stdout, /embedded PostgreSQL/);
    assert.doesNotMatch(run.stdout, /bank simulator|Bank sim/);
    // Every task key goes to the candidate cluster: the flag, not a static split, decides.
    const totals = totalCompleted(run.stdout);
    assert.ok((totals.candidate ?? 0) > 0, output);
    assert.equal(totals.baseline ?? 0, 0, output);
    assert.match(run.stdout, / {2}private Redis\.\.\. ok\nstopped\n/);
    const pids = printedPids(run.stdout);
    assert.equal(pids.length, 8, 'Redis, control plane, 2 balancers, 3 workers and the load generator');
    // The join commands name the given Unleash, the sleep handlers and no bank simulator.
    const commands = joinCommands(run.stdout);
    assert.ok(commands, output);
    // The client token is not printed: the commands read it from a file of this run's, removed at exit.
    assert.ok(!`${run.stdout}${run.stderr}`.includes(unleash.clientToken), 'the Unleash client token is not printed');
    const tokenFile = /^UNLEASH_CLIENT_TOKEN="\$\(cat (\S+)\)" node balancer\/dist\/src\/cli\.js /.exec(commands.balancer)?.[1];
    assert.ok(tokenFile, commands.balancer);
    assert.equal(fs.existsSync(tokenFile), false, `${tokenFile} is removed at exit`);
    assert.ok(commands.candidate.includes(` --handlers sim/dist/src/handlers/demo.js `), commands.candidate);
    assert.ok(commands.candidate.includes(` --unleash-url ${unleash.url} `), commands.candidate);
    assert.doesNotMatch(commands.candidate, /HEADROOM_BANK_URL/);
    assert.deepEqual(pids.filter(isRunning), []);
    assert.equal((await fetch(`${unleash.url}/health`)).status, 200, 'the given Unleash still runs');
  },
);

test('--rollout demo starts the demo plan through the API once everything runs: its first step is in effect', { timeout: 60_000 }, async (t) => {
  const unleash = await sharedUnleash();
  const database = await testDatabase('hr_demo_rollout');
  t.after(() => database.drop());
  const keyPrefix = uniquePrefix('demo');
  const redis = connectRedis(testRedisUrl) as Redis;
  t.after(async () => {
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
  });
  const env = {
    ...process.env,
    UNLEASH_URL: unleash.url,
    UNLEASH_ADMIN_TOKEN: unleash.adminToken,
    UNLEASH_CLIENT_TOKEN: unleash.clientToken,
    HEADROOM_DATABASE_URL: database.url,
  };
  const run = await runDemo(
    [
      '--rollout',
      'demo',
      '--duration-s',
      '2',
      '--balancer-port',
      '0',
      '--control-plane-port',
      '0',
      '--baseline-workers',
      '1',
      '--candidate-workers',
      '1',
      '--redis-url',
      testRedisUrl,
      '--key-prefix',
      keyPrefix,
      '--workload',
      'sleep',
    ],
    { env, timeoutMs: 50_000 },
  );
  const output = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.code, 0, output);
  const started =
    /^starting the demo rollout plan \(POST http:\/\/127\.0\.0\.1:\d+\/api\/v1\/rollouts\)\.\.\. ok \((ro-[0-9a-f]{10}): 3 steps; watch it on the Rollouts page/m.exec(
      run.stdout,
    );
  assert.ok(started, output);
  assert.doesNotMatch(run.stdout, /rollouts: npm start -- --rollout demo/, 'the hint is for runs without it');
  // The rollout's live state stays in Redis under the given prefix: the plan, in its first step, the candidate at 4.
  const stored = JSON.parse((await redis.hget(`{${keyPrefix}:control}:rollout`, 'json'))!);
  assert.equal(stored.id, started[1]);
  assert.equal(stored.plan.name, 'demo: parallel workers');
  assert.deepEqual(stored.plan.integrations, ['bank-a', 'bank-b', 'bank-c']);
  assert.deepEqual([stored.status, stored.step, stored.maxParallelism], ['running', 0, 4]);
});

test('an invalid option exits 2 with a message naming it and what it accepts', async () => {
  const flag = await runDemo(['--baseline-workers', '0']);
  assert.equal(flag.code, 2);
  assert.match(flag.stderr, /--baseline-workers: got "0", expected a number >= 1/);
  assert.equal(flag.stdout, '');

  const env = await runDemo([], { env: { ...process.env, HEADROOM_DEMO_CANDIDATE_PERCENT: '150' } });
  assert.equal(env.code, 2);
  assert.match(env.stderr, /HEADROOM_DEMO_CANDIDATE_PERCENT \(env\): got "150", expected a percentage from 0 to 100/);

  const fraction = await runDemo(['--candidate-percent', '12.5']);
  assert.equal(fraction.code, 2);
  assert.match(fraction.stderr, /--candidate-percent: got "12\.5", expected a whole percentage from 0 to 100/);

  const workload = await runDemo(['--workload', 'cpu']);
  assert.equal(workload.code, 2);
  assert.match(workload.stderr, /--workload: got "cpu", expected one of bank, sleep/);

  for (const balancers of ['0', 'abc']) {
    const run = await runDemo(['--balancers', balancers]);
    assert.equal(run.code, 2);
    assert.match(run.stderr, new RegExp(`--balancers: got "${balancers}", expected a whole number from 1 to 8`));
  }

  const unknown = await runDemo(['--workers', '3']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /Unknown option '--workers'/);

  const noTokens = await runDemo(['--unleash-url', 'http://127.0.0.1:4242']);
  assert.equal(noTokens.code, 2);
  assert.match(noTokens.stderr, /--unleash-admin-token: required/);
  assert.match(noTokens.stderr, /--unleash-client-token: required/);
  assert.match(noTokens.stderr, /--database-url: required/);

  const tokenAlone = await runDemo(['--unleash-client-token', 'secret-client-token']);
  assert.equal(tokenAlone.code, 2);
  assert.match(tokenAlone.stderr, /--unleash-client-token: only used with --unleash-url/);
  assert.doesNotMatch(tokenAlone.stderr, /secret-client-token/, 'a token is never echoed');
});

test('without Redis and without redis-server it says how to get Redis and exits 1', async () => {
  const nothingThere = `redis://127.0.0.1:${await freePort()}`;
  const run = await runDemo([], { env: { ...process.env, PATH: '/nonexistent', REDIS_URL: nothingThere } });
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(run.stderr, new RegExp(`nothing answers at ${nothingThere}, and redis-server is not on the PATH`));
  assert.match(run.stderr, /apt-get install redis-server/);
  assert.match(run.stderr, /REDIS_URL=/);
});

test('a given Unleash that does not answer stops the demo with a message naming UNLEASH_URL, exit 1', async () => {
  const nowhere = `http://127.0.0.1:${await freePort()}`;
  const run = await runDemo(['--balancer-port', '0', '--control-plane-port', '0', '--redis-url', testRedisUrl], {
    env: {
      ...process.env,
      UNLEASH_URL: nowhere,
      UNLEASH_ADMIN_TOKEN: 'admin-token',
      UNLEASH_CLIENT_TOKEN: 'client-token',
      HEADROOM_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
    },
  });
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(run.stderr, new RegExp(`Unleash at ${nowhere} \\(--unleash-url, UNLEASH_URL\\): GET /health failed`));
  assert.match(run.stderr, /leave UNLEASH_URL unset and the demo runs an Unleash of its own/);
});

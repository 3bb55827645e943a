import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { startFleet } from '@headroom/testkit';
import type { BalancerOptions } from '@headroom/balancer';
import type { HandlerMap, TaskContext } from '@headroom/worker';
import {
  LatencyHistogram,
  SendSchedule,
  Workload,
  formatLoadReport,
  integrationProfiles,
  skewedRank,
  startLoadGenerator,
  type WorkloadOptions,
} from '../src/loadgen';

const loadgenCli = path.join(__dirname, '..', 'src', 'loadgen', 'cli.js');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A balancer and one worker per cluster in this process, under a key prefix of their own. */
async function startBalancer(t: TestContext, balancerOptions: BalancerOptions, maxParallelism: number, handlers?: HandlerMap): Promise<string> {
  const fleet = await startFleet(t);
  for (const cluster of ['baseline', 'candidate']) await fleet.addWorker({ cluster, maxParallelism }, handlers);
  return (await fleet.addBalancer(balancerOptions)).address;
}

test('the histogram gives percentiles within 1%', () => {
  const histogram = new LatencyHistogram();
  for (let ms = 1; ms <= 1000; ms++) histogram.record(ms);
  const summary = histogram.summary();
  assert.equal(summary.count, 1000);
  for (const [got, want] of [
    [summary.p50Ms, 500],
    [summary.p95Ms, 950],
    [summary.p99Ms, 990],
  ] as const) {
    assert.ok(Math.abs(got - want) <= want * 0.01, `got ${got}, want ${want} (±1%)`);
  }
  assert.equal(summary.maxMs, 1000);
  assert.equal(new LatencyHistogram().summary().p99Ms, 0);
});

const workloadOptions: WorkloadOptions = {
  integrations: ['bank-a', 'bank-b', 'bank-c'],
  medianSleepMsRange: [20, 80],
  sleepSigma: 0.8,
  maxSleepMs: 2000,
  userPresentShare: 0.1,
  keyCount: 50,
  taskTimeoutMs: 10_000,
};

test('the workload mixes priorities, keys and log-normal upstream times as configured', () => {
  const options = workloadOptions;
  assert.deepEqual(
    integrationProfiles(options).map((p) => p.medianSleepMs),
    [20, 50, 80],
  );
  const workload = new Workload(options);
  const sleeps = new Map<string, number[]>();
  let userPresent = 0;
  const draws = 20_000;
  for (let i = 0; i < draws; i++) {
    const task = workload.next(1_000);
    if (task.priority === 'USER_PRESENT') userPresent++;
    assert.match(task.key!, /^account-([0-9]|[1-4][0-9])$/);
    assert.equal(task.deadlineUnixMs, 11_000);
    const { sleepMs } = JSON.parse(task.payload!.toString()) as { sleepMs: number };
    assert.ok(sleepMs >= 0 && sleepMs <= 2000);
    sleeps.set(task.integration!, [...(sleeps.get(task.integration!) ?? []), sleepMs]);
  }
  assert.ok(Math.abs(userPresent / draws - 0.1) < 0.015, `${userPresent} of ${draws} user-present`);
  for (const [integration, median] of [
    ['bank-a', 20],
    ['bank-b', 50],
    ['bank-c', 80],
  ] as const) {
    const sorted = sleeps.get(integration)!.sort((a, b) => a - b);
    const p50 = sorted[Math.floor(sorted.length / 2)]!;
    const p99 = sorted[Math.floor(sorted.length * 0.99)]!;
    assert.ok(Math.abs(p50 - median) <= median * 0.15, `${integration}: median ${p50}, want ${median}`);
    assert.ok(p99 > median * 4, `${integration}: p99 ${p99} shows a heavy tail`);
  }
});

test('sends at the set rate and reports answers by cluster and priority', async (t) => {
  const balancerAddress = await startBalancer(t, { candidatePercent: 50 }, 20);
  const generator = startLoadGenerator({
    balancerAddresses: [balancerAddress],
    ratePerS: 100,
    medianSleepMsRange: [5, 10],
    keyCount: 500,
    userPresentShare: 0.2,
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const report = await generator.close();
  const { total } = report;
  assert.ok(total.sent >= 85 && total.sent <= 101, `sent ${total.sent} in about 1 s at 100/s`);
  assert.equal(total.completed, total.sent, JSON.stringify(total.rejectedByCode));
  assert.equal(total.rejected, 0);
  assert.equal(total.droppedOutstandingLimit + total.droppedBehindSchedule, 0);
  assert.equal(report.outstandingCalls, 0);
  for (const cluster of ['baseline', 'candidate']) {
    const figures = total.clusters[cluster];
    assert.ok(figures && figures.completed > 10, `${cluster}: ${JSON.stringify(figures)}`);
    const { USER_PRESENT, BACKGROUND } = figures.latencyMs;
    assert.equal(USER_PRESENT.count + BACKGROUND.count, figures.completed);
    assert.ok(BACKGROUND.p50Ms >= 3 && BACKGROUND.p50Ms <= BACKGROUND.p99Ms, JSON.stringify(BACKGROUND));
  }
  // close() is idempotent.
  assert.equal(await generator.close(), report);
});

test('tasks due while too many calls await answers are dropped and counted, not queued', async (t) => {
  const balancerAddress = await startBalancer(t, { candidatePercent: 0 }, 10);
  const generator = startLoadGenerator({
    balancerAddresses: [balancerAddress],
    ratePerS: 50,
    maxOutstandingCalls: 3,
    medianSleepMsRange: [300, 300],
    sleepSigma: 0,
    userPresentShare: 0,
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assert.ok(generator.outstandingCalls <= 3);
  const { total } = await generator.close();
  assert.ok(total.droppedOutstandingLimit >= 30, `dropped ${total.droppedOutstandingLimit}`);
  assert.ok(total.sent <= 12, `sent ${total.sent}`);
  assert.equal(total.sent, total.completed + total.rejected);
});

test('close() waits drainTimeoutMs for answers, then cancels the rest and counts them', async (t) => {
  const balancerAddress = await startBalancer(t, { candidatePercent: 0 }, 10);
  const generator = startLoadGenerator({
    balancerAddresses: [balancerAddress],
    ratePerS: 50,
    payload: '{"sleepMs":3000}',
    userPresentShare: 0,
    drainTimeoutMs: 200,
  });
  await sleep(300);
  const startedClosingAtMs = performance.now();
  const { total, outstandingCalls } = await generator.close();
  const closingMs = performance.now() - startedClosingAtMs;
  assert.ok(closingMs >= 190 && closingMs < 1500, `closed in ${closingMs} ms`);
  assert.equal(outstandingCalls, 0);
  assert.ok(total.sent >= 5, `sent ${total.sent}`);
  assert.equal(total.rejectedByCode.GRPC_CANCELLED, total.sent, JSON.stringify(total.rejectedByCode));
});

test('key ranks follow a power law: the busiest keys get far more than their share, and skew 0 spreads evenly', () => {
  const keyCount = 1000;
  const draws = 50_000;
  const topShare = (skew: number) => {
    let top = 0;
    for (let i = 0; i < draws; i++) {
      const rank = skewedRank(keyCount, skew, Math.random());
      assert.ok(Number.isInteger(rank) && rank >= 0 && rank < keyCount, `rank ${rank}`);
      if (rank < keyCount / 100) top++;
    }
    return top / draws;
  };
  // The busiest 1% of keys: ln(11)/ln(1001) = 35% of tasks at skew 1, 1% when every key is alike.
  assert.ok(Math.abs(topShare(1) - 0.347) < 0.02, `skew 1: ${topShare(1)}`);
  assert.ok(Math.abs(topShare(0) - 0.01) < 0.004, `skew 0: ${topShare(0)}`);
  assert.ok(topShare(1.5) > topShare(1));
  assert.equal(skewedRank(keyCount, 1, 0), 0);
  assert.equal(skewedRank(keyCount, 1, 1 - Number.EPSILON), keyCount - 1);
  assert.equal(skewedRank(1, 2, 0.7), 0);
});

test('the workload spreads tasks over integrations by weight and adds the payload template', () => {
  const options = { ...workloadOptions, integrations: [{ name: 'bank-a', weight: 2 }, 'bank-b', 'bank-c'] };
  const merged = new Workload({ ...options, payload: { allocateKb: 4 } });
  const byIntegration = new Map<string, number>();
  for (let i = 0; i < 10_000; i++) {
    const task = merged.next(0, 'BACKGROUND');
    assert.equal(task.priority, 'BACKGROUND');
    const payload = JSON.parse(task.payload!.toString()) as { sleepMs: number; allocateKb: number };
    assert.equal(payload.allocateKb, 4);
    assert.ok(payload.sleepMs >= 0 && payload.sleepMs <= 2000);
    byIntegration.set(task.integration!, (byIntegration.get(task.integration!) ?? 0) + 1);
  }
  for (const [integration, share] of [
    ['bank-a', 0.5],
    ['bank-b', 0.25],
    ['bank-c', 0.25],
  ] as const) {
    assert.ok(Math.abs(byIntegration.get(integration)! / 10_000 - share) < 0.03, `${integration}: ${byIntegration.get(integration)}`);
  }
  // A sleepMs in the template replaces the draw.
  const fixed = new Workload({ ...options, payload: { sleepMs: 20 } });
  assert.equal(fixed.next(0).payload!.toString(), '{"sleepMs":20}');
});

test('the schedule: user-present at a constant rate, background x factor during periodic and one-shot spikes', () => {
  const periodic = new SendSchedule({ ratePerS: 100, userPresentShare: 0.1, spikeEveryMs: 1000, spikeDurationMs: 250, spikeFactor: 10 });
  assert.deepEqual(
    [0, 999, 1000, 1249, 1250, 2100].map((ms) => periodic.phaseAt(ms)),
    ['steady', 'steady', 'spike', 'spike', 'steady', 'spike'],
  );
  assert.equal(periodic.spikeMsUpTo(999), 0);
  assert.equal(periodic.spikeMsUpTo(1100), 100);
  assert.equal(periodic.spikeMsUpTo(2100), 350);
  // 2.1 s: 1.75 s steady at 90/s + 0.35 s spiking at 900/s.
  assert.equal(periodic.dueBy('BACKGROUND', 2100), 157 + 315);
  assert.equal(periodic.dueBy('USER_PRESENT', 2100), 21);
  // 90 background tasks fall due in the first second: the 89th (sequence 88) before the first spike,
  // the 91st (90) in it. Each counts in the phase it fell due in, whenever it was sent.
  assert.equal(periodic.phaseAt(periodic.dueAtMs('BACKGROUND', 88, 2100)), 'steady');
  assert.equal(periodic.phaseAt(periodic.dueAtMs('BACKGROUND', 90, 2100)), 'spike');
  assert.ok(Math.abs(periodic.dueAtMs('BACKGROUND', 90 + 225 - 1, 2100) - 1250) <= 1, 'the 225 spike tasks fall due by 1.25 s');
  assert.equal(periodic.targetRatePerS('spike'), 910);

  // A one-shot spike that overlaps a periodic one is counted once.
  const both = new SendSchedule({ ratePerS: 10, userPresentShare: 0, spikeEveryMs: 1000, spikeDurationMs: 300, spikeFactor: 2, spikeAtMs: 900 });
  assert.equal(both.phaseAt(950), 'spike');
  assert.equal(both.spikeMsUpTo(1100), 200);
  assert.equal(both.spikeMsUpTo(5000), 400 + 300 * 3);
  const none = new SendSchedule({ ratePerS: 10, userPresentShare: 0.5, spikeEveryMs: 0, spikeDurationMs: 300, spikeFactor: 10 });
  assert.equal(none.hasSpikes, false);
  assert.equal(none.spikeMsUpTo(60_000), 0);
  assert.equal(none.peakRatePerS('BACKGROUND'), 5);
});

/** Handlers that note what reached the workers and answer at once. */
function recordingHandlers(): { handlers: HandlerMap; seen: Pick<TaskContext, 'key' | 'integration' | 'priority'>[] } {
  const seen: Pick<TaskContext, 'key' | 'integration' | 'priority'>[] = [];
  return { seen, handlers: { '*': async (task) => void seen.push({ key: task.key, integration: task.integration, priority: task.priority }) } };
}

test('through a real balancer: about 10% user-present, integrations by weight, the busiest keys get the most tasks', async (t) => {
  const { handlers, seen } = recordingHandlers();
  const balancerAddress = await startBalancer(t, { candidatePercent: 50 }, 20, handlers);
  const generator = startLoadGenerator({ balancerAddresses: [balancerAddress], ratePerS: 250, integrations: 'bank-a:2,bank-b,bank-c', keyCount: 1000 });
  await sleep(1600);
  const { total } = await generator.close();
  assert.equal(total.completed, total.sent, JSON.stringify(total.rejectedByCode));
  assert.equal(seen.length, total.completed);
  assert.ok(seen.length >= 300, `${seen.length} tasks`);
  const share = (filter: (task: (typeof seen)[number]) => boolean) => seen.filter(filter).length / seen.length;
  assert.ok(Math.abs(share((task) => task.priority === 'USER_PRESENT') - 0.1) < 0.02, `user-present ${total.priorities.USER_PRESENT.sent} of ${total.sent}`);
  assert.equal(total.priorities.USER_PRESENT.completed + total.priorities.BACKGROUND.completed, total.completed);
  assert.ok(Math.abs(share((task) => task.integration === 'bank-a') - 0.5) < 0.1);
  // Default skew 1: the busiest 1% of keys send about 35% of the tasks; spread evenly it would be 1%.
  const topKeys = share((task) => Number(task.key.replace('account-', '')) < 10);
  assert.ok(topKeys > 0.2, `the busiest 10 keys got ${topKeys}`);
});

test('with several balancers, each gets its turn: the tasks are spread evenly', async (t) => {
  const fleet = await startFleet(t);
  for (const cluster of ['baseline', 'candidate']) await fleet.addWorker({ cluster, maxParallelism: 20 });
  const balancers = [await fleet.addBalancer({ candidatePercent: 50 }), await fleet.addBalancer({ candidatePercent: 50 })];
  const generator = startLoadGenerator({ balancerAddresses: balancers.map((b) => b.address), ratePerS: 100, medianSleepMsRange: [5, 10], keyCount: 500 });
  await sleep(1000);
  const report = await generator.close();
  assert.ok(report.total.completed > 50, `${report.total.completed} tasks completed`);
  const submitted = await Promise.all(
    balancers.map(async (balancer) => {
      const metric = await balancer.registry.getSingleMetric('headroom_balancer_tasks_total')!.get();
      return metric.values.reduce((sum, { value }) => sum + value, 0);
    }),
  );
  assert.equal(submitted[0]! + submitted[1]!, report.total.sent);
  assert.ok(Math.abs(submitted[0]! - submitted[1]!) <= 1, `tasks per balancer: ${submitted.join(', ')}`);
});

test('a spike sends background tasks at factor x their rate, and the report shows each phase apart', async (t) => {
  // One cluster of 4 slots, 50 ms tasks: steady load fits, the spike fills the balancer's queue.
  const fleet = await startFleet(t);
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 });
  const { address: balancerAddress } = await fleet.addBalancer({ candidatePercent: 0, maxQueuedTasks: 20 });
  const generator = startLoadGenerator({
    balancerAddresses: [balancerAddress],
    ratePerS: 40,
    userPresentShare: 0.25,
    payload: '{"sleepMs":50}',
    spikeEveryMs: 1000,
    spikeDurationMs: 500,
    spikeFactor: 10,
    drainTimeoutMs: 2000,
  });
  await sleep(800);
  assert.equal(generator.report().phase, 'steady');
  await sleep(400);
  assert.equal(generator.report().phase, 'spike');
  // Stopped well before the next spike (at 2 s), so the spike phase is exactly 0.5 s.
  await sleep(450);
  const report = await generator.close();
  const { steady, spike } = report.phases;
  assert.ok(Math.abs(spike.seconds - 0.5) < 0.01, `spike ${spike.seconds} s`);
  assert.ok(Math.abs(steady.seconds + spike.seconds - report.total.seconds) < 0.001);
  assert.equal(spike.targetRatePerS, 10 + 30 * 10);
  const background = (phase: typeof steady) => phase.priorities.BACKGROUND.sentPerS;
  const ratio = background(spike) / background(steady);
  // Phases of a second or less: a loaded machine's late timers, caught up in bursts, move each
  // rate by a quarter or so (seen: 284/s against 36/s). Without the spike the ratio is 1.
  assert.ok(ratio > 6 && ratio < 14, `background ${background(spike)}/s in the spike, ${background(steady)}/s steady`);
  assert.ok(Math.abs(steady.priorities.USER_PRESENT.sentPerS - 10) < 2, `user-present ${steady.priorities.USER_PRESENT.sentPerS}/s steady`);
  assert.ok(Math.abs(spike.priorities.USER_PRESENT.sentPerS - 10) < 4, `user-present ${spike.priorities.USER_PRESENT.sentPerS}/s in the spike`);
  assert.equal(steady.sent + spike.sent, report.total.sent);
  assert.equal(report.total.droppedBehindSchedule + report.total.droppedOutstandingLimit, 0);

  // The spike overflowed the queue: background tasks were refused or shed, user-present ones never.
  assert.ok(spike.queueFull > 0, JSON.stringify(spike.rejectedByCode));
  assert.equal(spike.priorities.BACKGROUND.rejectedByCode.HR_ERR_QUEUE_FULL, spike.queueFull);
  assert.equal(spike.shed + spike.queueFull, spike.rejected, JSON.stringify(spike.rejectedByCode));
  assert.equal(report.total.priorities.USER_PRESENT.rejected, 0);
  assert.ok(spike.priorities.BACKGROUND.latencyMs.p50Ms > steady.priorities.BACKGROUND.latencyMs.p50Ms);

  const text = formatLoadReport(report, 'total');
  assert.match(text, /^ {2}steady phase, 1\.\d s: sent \d+\.\d\/s \(target 40\), .*; shed \d+, queue full \d+$/m);
  assert.match(text, /^ {2}spike phase, 0\.5 s: sent \d+\.\d\/s \(target 310\), .*HR_ERR_QUEUE_FULL x\d+.*; shed \d+, queue full [1-9]\d*$/m);
  assert.match(text, /^ {4}background +sent \d+\.\d\/s, done \d+\.\d\/s, p50\/p95\/p99 [\d.]+\/[\d.]+\/[\d.]+ ms/m);
});

function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [loadgenCli, ...args], { env: { ...process.env, ...env }, timeout: 10_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr });
    });
  });
}

test('the CLI refuses bad options with exit 2, naming the flag or env variable and what it accepts', async () => {
  const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
    [['--balancer', '127.0.0.1:1,nowhere'], {}, /--balancer: got "127\.0\.0\.1:1,nowhere", expected host:port/],
    [['--keys', '0'], {}, /--keys: got "0", expected a number >= 1/],
    [['--key-skew=-1'], {}, /--key-skew: got "-1", expected a number from 0 to 3/],
    [['--integrations', 'bank-a:0,bank-b'], {}, /--integrations: got "bank-a:0,bank-b", expected NAME or NAME:WEIGHT with a weight above 0/],
    [['--payload', '{"sleepMs":'], {}, /--payload: got .*expected a JSON object/],
    [['--spike-every-s', '10', '--spike-duration-s', '10'], {}, /--spike-every-s: got "10", expected longer than a spike lasts \(10 s\)/],
    [['--spike-factor', 'x', '--spike-every-s', '60'], {}, /--spike-factor: got "x", expected a number from 0 to 1000/],
    [['--rate', '20000', '--spike-at-s', '5'], {}, /--rate: got "20000", a spike \(background x10\) would send 182000 tasks\/s; expected at most 100000/],
    [[], { HEADROOM_LOADGEN_SPIKE_DURATION_S: '0' }, /HEADROOM_LOADGEN_SPIKE_DURATION_S \(env\): got "0", expected seconds >= 0.01/],
    [[], { HEADROOM_LOADGEN_USER_PRESENT_SHARE: '1.5' }, /HEADROOM_LOADGEN_USER_PRESENT_SHARE \(env\): got "1.5", expected a number from 0 to 1/],
  ];
  for (const [args, env, message] of cases) {
    const run = await runCli(['--balancer', '127.0.0.1:1', '--duration-s', '0.1', ...args], env);
    assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, message);
  }
  const help = await runCli(['--help']);
  for (const flag of ['--keys', '--key-skew', '--integrations', '--payload', '--spike-every-s', '--spike-at-s', '--spike-duration-s', '--spike-factor']) {
    assert.match(help.stdout, new RegExp(`^ {2}${flag} `, 'm'));
  }
});

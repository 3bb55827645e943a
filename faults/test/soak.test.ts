/**
 * The soak, short: 1 minute of the whole system at 70% of its slots with every fault of the
 * soak once (a worker killed and started again, a rollback and its resume, a Redis restart, an
 * Unleash restart), sampled every 5 s. Too short to judge growth (that takes 10 minutes or more:
 * `npm run bench -- soak --minutes N`); it proves the run, its faults and its sampling work, and
 * that no task is lost. HEADROOM_SOAK_MINUTES makes it longer (the benchmark runs it so), and
 * HEADROOM_SOAK_REPORT names a file for its report.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { runSoak, startUnleashProcess, type UnleashProcess } from '../src/index';

const minutes = Number(process.env.HEADROOM_SOAK_MINUTES ?? 1);
const sampleEveryMs = minutes >= 10 ? 15_000 : 5_000;

let unleash: UnleashProcess;
before(async () => {
  unleash = await startUnleashProcess();
});
after(() => unleash?.close());

test(
  `soak: ${minutes} min at 70% of the slots with faults in turn; nothing lost, nothing grows without bound`,
  { timeout: (minutes + 5) * 60_000 },
  async (t) => {
    const report = await runSoak(t, { minutes, sampleEveryMs, unleash, progress: (line) => t.diagnostic(line) });
    if (process.env.HEADROOM_SOAK_REPORT) fs.writeFileSync(process.env.HEADROOM_SOAK_REPORT, JSON.stringify(report, null, 2));
    t.diagnostic(`faults ${JSON.stringify(report.faults)}; latency by quarter ${JSON.stringify(report.latencyByQuarter)}`);
    assert.equal(report.tasks.lost, 0);
    assert.deepEqual(
      ['kill -9 a worker', 'roll bank-a back', 'restart Redis', 'restart Unleash'].filter((what) => !report.faults.some((f) => f.what.startsWith(what))),
      [],
      'every fault came once at least',
    );
    // Every process was sampled (workers, balancers, the control plane) and Redis too.
    for (const kind of ['worker:', 'balancer:', 'control-plane:', 'redis/'])
      assert.ok(
        report.series.some((s) => s.name.startsWith(kind) && s.sampled >= 3),
        `${kind} sampled: ${report.series.map((s) => `${s.name} ${s.sampled}`).join(', ')}`,
      );
    // Heap snapshots after the warm-up (half the run, here) and at the end, of every process alive
    // through both: the balancers and the control plane at least.
    for (const kind of ['balancer:', 'control-plane:'])
      assert.ok(
        report.heapSnapshots.some((p) => p.process.startsWith(kind)),
        `${kind} snapshotted twice: ${JSON.stringify(report.heapSnapshots.map((p) => p.process))}`,
      );
    for (const p of report.heapSnapshots)
      assert.ok(p.programBytes.every((b) => b > 1_000_000) && p.v8Bytes.every((b) => b > 1_000_000) && p.atSeconds[1] > p.atSeconds[0], JSON.stringify(p));
    assert.ok(
      report.latencyByQuarter.every((q) => q.answered > 0),
      `served in every quarter: ${JSON.stringify(report.latencyByQuarter)}`,
    );
    if (report.judged) assert.deepEqual(report.grew, [], 'no series grows without bound');
  },
);

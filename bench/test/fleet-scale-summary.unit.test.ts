/**
 * How the fleet-scale mode judges "tasks/s one Redis carries at the planned share of its thread"
 *: from a load the harness drove at the goal's rate within the share, else linearly
 * from the costs. Synthetic loads: no Redis, no timing.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spread } from '../src/report/stats';
import type { FleetLoad, FleetScaleRun, FleetScaleSettings } from '../src/scale/fleet-scale';
import { carriedAtPlannedShare } from '../src/scale/fleet-scale-summary';

const settings = { plannedShareOfThread: 0.5, goalTasksPerSecond: 20_000 } as FleetScaleSettings;

function load(targetTasksPerSecond: number, reservedPerSecond: number, share: number, keptUp = true): FleetLoad {
  return { targetTasksPerSecond, tasksPerSecond: spread([reservedPerSecond]), shareOfThread: spread([share]), keptUp } as FleetLoad;
}

const run = (...loads: FleetLoad[]) => ({ loads, tasksPerSecondAtPlannedShare: 23_485 }) as unknown as FleetScaleRun;

test('a load driven at the goal rate within the share counts at that rate, though its windows counted a few reservations fewer', () => {
  const carried = carriedAtPlannedShare(run(load(10_000, 10_002, 0.3), load(20_000, 19_994, 0.434)), settings);
  assert.deepEqual(carried, { tasksPerSecond: 20_000, measured: true, shareOfThread: 0.434, reservedPerSecond: 19_994 });
});

test('a load the harness did not keep up with, or one over the share, is not a measurement: the linear figure stands', () => {
  for (const over of [load(20_000, 18_000, 0.45, false), load(20_000, 20_001, 0.53)]) {
    const carried = carriedAtPlannedShare(run(load(10_000, 10_002, 0.3), over), settings);
    assert.deepEqual(carried, { tasksPerSecond: 23_485, measured: false, shareOfThread: undefined, reservedPerSecond: undefined }, JSON.stringify(over));
  }
});

test('below the goal rate, a load counts only when it took within 5 points of the planned share', () => {
  assert.equal(carriedAtPlannedShare(run(load(15_000, 15_003, 0.47)), settings).tasksPerSecond, 15_000);
  assert.equal(carriedAtPlannedShare(run(load(15_000, 15_003, 0.47)), settings).measured, true);
  assert.equal(carriedAtPlannedShare(run(load(15_000, 15_003, 0.4)), settings).measured, false);
});

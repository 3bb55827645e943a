import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { slopePerHour } from '../src/index';

test("the soak's slope per hour: least squares over time, 0 for a flat or too short series", () => {
  const minute = 60_000;
  const mib = 2 ** 20;
  assert.equal(slopePerHour([]), 0);
  assert.equal(slopePerHour([{ atMs: 0, value: 5 }]), 0);
  assert.equal(slopePerHour([0, 1, 2, 3].map((i) => ({ atMs: i * minute, value: 30 * mib }))), 0);
  // 1 MiB more every minute: 60 MiB an hour.
  assert.equal(slopePerHour([0, 1, 2, 3, 4].map((i) => ({ atMs: i * minute, value: (30 + i) * mib }))), 60 * mib);
  // A sawtooth around a flat level does not count as growth; the same around a rising one does.
  const sawtooth = (rise: number) => Array.from({ length: 20 }, (_, i) => ({ atMs: i * minute, value: 100 + (i % 2 === 0 ? 10 : -10) + rise * i }));
  assert.ok(Math.abs(slopePerHour(sawtooth(0))) < 100, String(slopePerHour(sawtooth(0))));
  assert.ok(Math.abs(slopePerHour(sawtooth(1)) - 60) < 10, String(slopePerHour(sawtooth(1))));
  // Samples at uneven times (one missed while a process restarted) still give the rate.
  assert.equal(slopePerHour([0, 1, 3, 4].map((i) => ({ atMs: i * minute, value: 2 * i }))), 120);
});

/**
 * The profile summary's shares are of CPU time, as the UI's flame graph counts them: a process
 * idle most of the time still shows which function took its CPU.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { summarise, type Cpuprofile } from '../src/profiles/cpuprofile';

const frame = (functionName: string) => ({
  functionName,
  scriptId: '1',
  url: functionName.startsWith('(') ? '' : 'file:///app.js',
  lineNumber: 0,
  columnNumber: 0,
});

test('a function that ran 30 ms of 40 ms of CPU time has a share of 75%, whatever the idle time', () => {
  // 1 ms per sample: 60 idle, 30 in hot, 10 in (garbage collector).
  const profile: Cpuprofile = {
    nodes: [
      { id: 1, callFrame: frame('(root)'), children: [2, 3, 4] },
      { id: 2, callFrame: frame('(idle)') },
      { id: 3, callFrame: frame('hot') },
      { id: 4, callFrame: frame('(garbage collector)') },
    ],
    startTime: 0,
    // Each sample is charged the time until the next; the last, until endTime.
    endTime: 101_000,
    samples: [...Array<number>(60).fill(2), ...Array<number>(30).fill(3), ...Array<number>(10).fill(4)],
    timeDeltas: Array<number>(100).fill(1000),
  };
  const summary = summarise(profile, 10);
  assert.equal(summary.idleMs, 60);
  const share = (name: string) => summary.topFunctions.find((fn) => fn.functionName === name)?.share;
  assert.equal(share('hot'), 0.75);
  assert.equal(share('(garbage collector)'), 0.25);
});

/** A profile's top functions: their share is of CPU time, "(idle)" left out, as the flame graph's. */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { summarise, type Cpuprofile } from '../src/profiles/cpuprofile';

const frame = (functionName: string) => ({ functionName, scriptId: '0', url: functionName === 'parse' ? 'file:///app/parse.js' : '', lineNumber: 0, columnNumber: 0 });

test("a function's share is of the CPU time: a mostly idle worker's busiest function is not shown as a sliver", () => {
  // 1 s profiled at 1 ms a sample: 750 ms idle, 200 ms in parse, 50 ms in the garbage collector.
  const profile: Cpuprofile = {
    nodes: [
      { id: 1, callFrame: frame('(root)'), children: [2, 3, 4] },
      { id: 2, callFrame: frame('(idle)') },
      { id: 3, callFrame: frame('parse') },
      { id: 4, callFrame: frame('(garbage collector)') },
    ],
    startTime: 0,
    // Each sample is charged until the next; the last, until the end.
    endTime: 1_001_000,
    samples: [...Array<number>(750).fill(2), ...Array<number>(200).fill(3), ...Array<number>(50).fill(4)],
    timeDeltas: Array<number>(1000).fill(1000),
  } as Cpuprofile;
  const summary = summarise(profile, 10);
  assert.equal(summary.idleMs, 750);
  const parse = summary.topFunctions.find((fn) => fn.functionName === 'parse')!;
  assert.equal(parse.selfMs, 200);
  assert.equal(parse.share, 0.8, '200 ms of the 250 ms on the CPU');
  assert.equal(summary.topFunctions.find((fn) => fn.functionName === '(garbage collector)')!.share, 0.2);
});

/**
 * The conversion of a .cpuprofile into the flame graph's tree: a hand-written profile whose
 * samples give known times per frame, then the bounds that keep a large profile drawable.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { parseCpuprofile, toFlameTree, type Cpuprofile, type CpuprofileNode, type FlameFrame } from '../src/pages/workers/flame-tree';

const frame = (functionName: string, url = '', lineNumber = -1, columnNumber = -1) => ({
  functionName,
  url,
  lineNumber,
  columnNumber,
  scriptId: url ? '1' : '0',
});

/**
 * (root) → (program), (idle), (garbage collector), main → busy (twice: two nodes of one call
 * path), helper → readFile (node:fs). Samples 100 µs apart, then 50 µs, the last one charged
 * until endTime (150 µs).
 */
const handWritten: Cpuprofile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 3, 4, 5] },
    { id: 2, callFrame: frame('(program)') },
    { id: 3, callFrame: frame('(idle)') },
    { id: 4, callFrame: frame('main', 'file:///app.js', 0, 0), children: [6, 7, 9] },
    { id: 5, callFrame: frame('(garbage collector)') },
    { id: 6, callFrame: frame('busy', 'file:///app.js', 9, 2) },
    { id: 7, callFrame: frame('', 'file:///app.js', 19, 2), children: [8] },
    { id: 8, callFrame: frame('readFile', 'node:fs', 99, 4) },
    { id: 9, callFrame: frame('busy', 'file:///app.js', 9, 2) },
  ],
  startTime: 1000,
  endTime: 2000,
  samples: [6, 6, 9, 8, 4, 2, 3, 3, 5, 7],
  timeDeltas: [0, 100, 100, 100, 100, 100, 100, 100, 100, 50],
};

type Expected = Pick<FlameFrame, 'name' | 'kind' | 'url' | 'lineNumber' | 'columnNumber' | 'value' | 'selfUs' | 'mergedFrames'> & { children: Expected[] };
const leaf = (name: string, kind: FlameFrame['kind'], value: number, url = '', lineNumber = 0, columnNumber = 0): Expected => ({
  name,
  kind,
  url,
  lineNumber,
  columnNumber,
  value,
  selfUs: value,
  mergedFrames: 0,
  children: [],
});
const merged = (frames: number, value: number): Expected => ({
  ...leaf(`(${frames} smaller frame${frames === 1 ? '' : 's'})`, 'merged', value),
  mergedFrames: frames,
});

test('a hand-written profile: self and total time per call path, idle left out, program and GC kept', () => {
  const tree = toFlameTree(handWritten, { minShare: 0, maxFrames: 100 });
  const expected: Expected = {
    ...leaf('all CPU time', 'root', 800),
    selfUs: 0,
    children: [
      {
        ...leaf('main', 'js', 650, 'file:///app.js', 1, 1),
        selfUs: 100,
        children: [
          leaf('busy', 'js', 300, 'file:///app.js', 10, 3),
          { ...leaf('(anonymous)', 'js', 250, 'file:///app.js', 20, 3), selfUs: 150, children: [leaf('readFile', 'node', 100, 'node:fs', 100, 5)] },
        ],
      },
      leaf('(program)', 'native', 100),
      leaf('(garbage collector)', 'gc', 50),
    ],
  };
  assert.deepEqual(tree.root, expected);
  assert.equal(tree.cpuUs, 800);
  assert.equal(tree.idleUs, 200);
  assert.deepEqual([tree.framesInProfile, tree.framesShown, tree.framesMerged], [6, 6, 0]);
});

test('frames under the minimum share are merged into one frame per parent, totals unchanged', () => {
  // 20% of 800 µs: (program) and GC under the root, readFile under (anonymous).
  const tree = toFlameTree(handWritten, { minShare: 0.2, maxFrames: 100 });
  const [main, smallUnderRoot] = tree.root.children;
  assert.deepEqual(smallUnderRoot, merged(2, 150));
  assert.deepEqual(
    main!.children.map((child) => [child.name, child.value]),
    [
      ['busy', 300],
      ['(anonymous)', 250],
    ],
  );
  assert.deepEqual(main!.children[1]!.children, [merged(1, 100)]);
  assert.equal(tree.root.value, 800);
  assert.deepEqual([tree.framesInProfile, tree.framesShown, tree.framesMerged], [6, 5, 3]);
});

test('past maxFrames only the largest frames are kept, and with them every caller', () => {
  const tree = toFlameTree(handWritten, { minShare: 0, maxFrames: 2 });
  assert.deepEqual(
    tree.root.children.map((child) => [child.name, child.value]),
    [
      ['main', 650],
      ['(2 smaller frames)', 150],
    ],
  );
  // main and busy kept; (anonymous) and its readFile merged under main.
  assert.deepEqual(tree.root.children[0]!.children, [leaf('busy', 'js', 300, 'file:///app.js', 10, 3), merged(2, 250)]);
  assert.deepEqual([tree.framesShown, tree.framesMerged], [4, 4]);
});

test('without samples, hitCount gives the times (the mean interval per hit)', () => {
  const { samples: _samples, timeDeltas: _deltas, ...withoutSamples } = handWritten;
  const hits: Record<number, number> = { 2: 1, 3: 2, 4: 1, 6: 3, 8: 1, 7: 1, 5: 1 };
  const profile = { ...withoutSamples, nodes: withoutSamples.nodes.map((node) => ({ ...node, hitCount: hits[node.id] ?? 0 })) };
  const tree = toFlameTree(profile, { minShare: 0, maxFrames: 100 });
  // 10 hits over 1000 µs: 100 µs each.
  assert.equal(tree.idleUs, 200);
  assert.equal(tree.cpuUs, 800);
  assert.deepEqual(
    tree.root.children[0]!.children.map((child) => [child.name, child.value, child.selfUs]),
    [
      ['busy', 300, 300],
      ['(anonymous)', 200, 100],
    ],
  );
});

test('a large profile stays bounded, and every frame is its self time plus its children', () => {
  // 60,000 nodes, a random tree; samples spread over them.
  let seed = 7;
  const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  const nodes: CpuprofileNode[] = [{ id: 1, callFrame: frame('(root)'), children: [] }];
  for (let id = 2; id <= 60_000; id++) {
    const parent = nodes[Math.floor(random() ** 3 * nodes.length)]!;
    parent.children!.push(id);
    nodes.push({ id, callFrame: frame(`fn${id % 5000}`, `file:///lib/m${id % 50}.js`, id % 300, 0), children: [] });
  }
  const samples = Array.from({ length: 200_000 }, () => 1 + Math.floor(random() * nodes.length));
  const profile: Cpuprofile = { nodes, startTime: 0, endTime: (200_000 + 1) * 100, samples, timeDeltas: samples.map(() => 100) };
  const tree = toFlameTree(parseCpuprofile(JSON.stringify(profile)));
  assert.ok(tree.framesInProfile > 50_000, `${tree.framesInProfile} frames in the profile`);
  let drawn = 0;
  const check = (f: FlameFrame) => {
    drawn++;
    const children = f.children.reduce((sum, child) => sum + child.value, 0);
    assert.ok(Math.abs(f.value - f.selfUs - children) < 1e-6, `${f.name}: ${f.value} = ${f.selfUs} + ${children}`);
    if (f.kind !== 'root' && f.kind !== 'merged') assert.ok(f.value >= tree.cpuUs * tree.minShare, `${f.name} is above the share`);
    f.children.forEach(check);
  };
  check(tree.root);
  assert.equal(drawn - 1, tree.framesShown);
  assert.ok(tree.framesShown <= 2 * 2000, `${tree.framesShown} frames drawn`);
  assert.equal(tree.cpuUs, 200_000 * 100);
});

test('what is not a .cpuprofile is refused, saying why', () => {
  assert.throws(() => parseCpuprofile('{"nodes": []}'), /not a \.cpuprofile: no nodes/);
  assert.throws(() => parseCpuprofile('{"nodes": [{"id": 1}], "startTime": 0, "endTime": 1}'), /nodes\[0\] needs an id and a callFrame/);
  assert.throws(() => parseCpuprofile('{"nodes": [{"id": 1, "callFrame": {"functionName": "", "url": ""}}]}'), /startTime and endTime/);
  assert.throws(() => parseCpuprofile('not json'), SyntaxError);
  // A cycle (a node listed as its own child) is read once.
  const cyclic: Cpuprofile = {
    nodes: [
      { id: 1, callFrame: frame('(root)'), children: [2] },
      { id: 2, callFrame: frame('loop', 'file:///a.js', 0, 0), children: [2] },
    ],
    startTime: 0,
    endTime: 100,
    samples: [2],
    timeDeltas: [0],
  };
  assert.equal(toFlameTree(cyclic).root.children[0]!.value, 100);
});

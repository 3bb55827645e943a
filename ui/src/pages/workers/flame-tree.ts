/**
 * A .cpuprofile (V8's Profiler.stop, what GET /profiles/:id/cpuprofile serves) turned into the
 * tree d3-flame-graph draws: one frame per call path, `value` its total time (itself and its
 * callees), `selfUs` its own. Pure, so that it runs in a Web Worker and in node's tests.
 *
 * Time per node comes from the samples, as DevTools counts it: each sample is charged the time
 * until the next one (the last, until endTime); without samples, hitCount x the mean interval.
 * "(idle)" (the process waiting for work) is left out, so shares are of CPU time; "(program)"
 * (V8 code not attributed to JavaScript) and "(garbage collector)" stay, as frames of their own.
 * A profile can hold 100,000 nodes: frames below `minShare` of the CPU time, and any past the
 * `maxFrames` largest, are merged into one frame per parent, so what is drawn stays bounded.
 */

/** The fields of a .cpuprofile read here. Times in microseconds; line and column 0-based. */
export interface Cpuprofile {
  nodes: CpuprofileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface CpuprofileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
  children?: number[];
}

/**
 * root: all CPU time; js: the application's code; node: Node.js's own JavaScript (node:...);
 * native: code without a script ("(program)", builtins); gc: the garbage collector; merged: the
 * small frames of one parent, taken together.
 */
export type FrameKind = 'root' | 'js' | 'node' | 'native' | 'gc' | 'merged';

export interface FlameFrame {
  /** The function's name, "(anonymous)" without one. */
  name: string;
  kind: FrameKind;
  url: string;
  /** 1-based, as editors show it; 0 when V8 gives none. */
  lineNumber: number;
  columnNumber: number;
  /** Total time in µs, callees included: the width d3-flame-graph gives the frame. */
  value: number;
  /** Time in µs the function itself was on the CPU. */
  selfUs: number;
  /** How many frames of the profile a merged frame stands for (0 otherwise). */
  mergedFrames: number;
  children: FlameFrame[];
}

export interface FlameTree {
  root: FlameFrame;
  /** Sampled time on the CPU: the root's value. */
  cpuUs: number;
  /** Sampled time waiting for work, left out of the tree. */
  idleUs: number;
  /** Call paths in the profile (the root excluded), before merging. */
  framesInProfile: number;
  /** Frames in the tree, merged ones included (the root excluded). */
  framesShown: number;
  /** Frames of the profile folded into merged frames. */
  framesMerged: number;
  minShare: number;
}

export interface FlameTreeOptions {
  /** Frames whose total time is below this share of the CPU time are merged (0..1). */
  minShare: number;
  /** At most this many frames of the profile are kept as they are (the largest). */
  maxFrames: number;
}

/** 0.1% of the CPU time, and at most 2,000 frames: an SVG the browser draws in tens of ms. */
export const flameTreeDefaults: FlameTreeOptions = { minShare: 0.001, maxFrames: 2000 };

const rootName = '(root)';
const idleName = '(idle)';
const gcName = '(garbage collector)';

/** Parses a .cpuprofile's JSON, checking what the conversion reads; throws saying what is wrong. */
export function parseCpuprofile(json: string): Cpuprofile {
  const raw: unknown = JSON.parse(json);
  const profile = raw as Partial<Cpuprofile> | null;
  if (typeof profile !== 'object' || profile === null || !Array.isArray(profile.nodes) || profile.nodes.length === 0) {
    throw new Error('not a .cpuprofile: no nodes');
  }
  if (typeof profile.startTime !== 'number' || typeof profile.endTime !== 'number') throw new Error('not a .cpuprofile: startTime and endTime must be numbers');
  for (const [index, node] of profile.nodes.entries()) {
    const frame = (node as Partial<CpuprofileNode> | null)?.callFrame;
    if (typeof node?.id !== 'number' || typeof frame?.functionName !== 'string' || typeof frame.url !== 'string') {
      throw new Error(`not a .cpuprofile: nodes[${index}] needs an id and a callFrame with functionName and url`);
    }
  }
  return profile as Cpuprofile;
}

/** Time in µs each node was sampled on top of the stack, by node id. */
export function sampledUsByNode(profile: Cpuprofile): Map<number, number> {
  const usByNode = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  if (samples.length === 0 || deltas.length !== samples.length) {
    const hitCount = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
    const usPerHit = hitCount > 0 ? (profile.endTime - profile.startTime) / hitCount : 0;
    for (const node of profile.nodes) usByNode.set(node.id, (node.hitCount ?? 0) * usPerHit);
    return usByNode;
  }
  let sampledAtUs = profile.startTime + deltas[0]!;
  for (let i = 0; i < samples.length; i++) {
    const nextAtUs = i + 1 < samples.length ? sampledAtUs + deltas[i + 1]! : profile.endTime;
    const id = samples[i]!;
    usByNode.set(id, (usByNode.get(id) ?? 0) + Math.max(0, nextAtUs - sampledAtUs));
    sampledAtUs = nextAtUs;
  }
  return usByNode;
}

/** One call path while the tree is built; `order` is its place in creation order (parents first). */
interface PathFrame {
  frame: FlameFrame;
  parent: PathFrame | undefined;
  byKey: Map<string, PathFrame>;
  /** This frame and every frame under it. */
  subtreeFrames: number;
  order: number;
}

export function toFlameTree(profile: Cpuprofile, options: FlameTreeOptions = flameTreeDefaults): FlameTree {
  const usByNode = sampledUsByNode(profile);
  const nodeById = new Map(profile.nodes.map((node) => [node.id, node]));
  const childIds = new Set(profile.nodes.flatMap((node) => node.children ?? []));
  const roots = profile.nodes.filter((node) => !childIds.has(node.id));
  // V8 gives one "(root)"; anything else (several roots, or a cycle) is read from a root of our own.
  const profileRoot = roots.length === 1 && roots[0]!.callFrame.functionName === rootName ? roots[0]! : undefined;

  const root: PathFrame = { frame: newFrame('all CPU time', 'root', '', -1, -1), parent: undefined, byKey: new Map(), subtreeFrames: 1, order: 0 };
  const paths: PathFrame[] = [root];
  let idleUs = 0;
  const visited = new Set<number>();
  const stack: { node: CpuprofileNode; parent: PathFrame }[] = [];
  const pushChildren = (ids: readonly number[], parent: PathFrame) => {
    for (const id of ids) {
      const node = nodeById.get(id);
      if (node) stack.push({ node, parent });
    }
  };
  if (profileRoot) {
    visited.add(profileRoot.id);
    root.frame.selfUs += usByNode.get(profileRoot.id) ?? 0;
    pushChildren(profileRoot.children ?? [], root);
  } else {
    pushChildren(
      (roots.length > 0 ? roots : profile.nodes.slice(0, 1)).map((node) => node.id),
      root,
    );
  }
  while (stack.length > 0) {
    const { node, parent } = stack.pop()!;
    if (visited.has(node.id)) continue;
    visited.add(node.id);
    const { functionName, url, lineNumber, columnNumber } = node.callFrame;
    const us = usByNode.get(node.id) ?? 0;
    if (functionName === idleName && parent === root) {
      idleUs += us;
      continue;
    }
    // Nodes of one call path that V8 kept apart (another script id, say) are one frame here.
    const key = `${functionName}\n${url}\n${lineNumber}\n${columnNumber}`;
    let path = parent.byKey.get(key);
    if (!path) {
      path = {
        frame: newFrame(functionName || '(anonymous)', kindOf(functionName, url), url, lineNumber, columnNumber),
        parent,
        byKey: new Map(),
        subtreeFrames: 1,
        order: paths.length,
      };
      parent.byKey.set(key, path);
      paths.push(path);
    }
    path.frame.selfUs += us;
    pushChildren(node.children ?? [], path);
  }

  // Totals from the leaves up: children were created after their parents.
  for (const path of paths) path.frame.value = path.frame.selfUs;
  for (let i = paths.length - 1; i > 0; i--) {
    const path = paths[i]!;
    path.parent!.frame.value += path.frame.value;
    path.parent!.subtreeFrames += path.subtreeFrames;
  }

  // The frames kept as they are: the largest, above the share. A frame is never larger than its
  // parent, and the sort is stable (parents come first in `paths`), so every kept frame's parent
  // is kept too.
  const cpuUs = root.frame.value;
  const minUs = cpuUs * options.minShare;
  const kept = new Set(
    paths
      .filter((path) => path === root || (path.frame.value > 0 && path.frame.value >= minUs))
      .sort((a, b) => b.frame.value - a.frame.value || a.order - b.order)
      .slice(0, options.maxFrames + 1),
  );
  let framesShown = 0;
  let framesMerged = 0;
  for (const path of paths) {
    if (!kept.has(path)) continue;
    const children = [...path.byKey.values()];
    const keptChildren = children.filter((child) => kept.has(child)).sort((a, b) => b.frame.value - a.frame.value);
    path.frame.children = keptChildren.map((child) => child.frame);
    framesShown += keptChildren.length;
    const left = children.filter((child) => !kept.has(child));
    const leftUs = left.reduce((sum, child) => sum + child.frame.value, 0);
    const leftFrames = left.reduce((sum, child) => sum + child.subtreeFrames, 0);
    if (leftUs > 0) {
      const merged = newFrame(`(${leftFrames} smaller frame${leftFrames === 1 ? '' : 's'})`, 'merged', '', -1, -1);
      merged.value = leftUs;
      merged.selfUs = leftUs;
      merged.mergedFrames = leftFrames;
      path.frame.children.push(merged);
      framesShown++;
    }
    framesMerged += leftFrames;
  }
  return { root: root.frame, cpuUs, idleUs, framesInProfile: paths.length - 1, framesShown, framesMerged, minShare: options.minShare };
}

function newFrame(name: string, kind: FrameKind, url: string, lineNumber: number, columnNumber: number): FlameFrame {
  return { name, kind, url, lineNumber: lineNumber + 1, columnNumber: columnNumber + 1, value: 0, selfUs: 0, mergedFrames: 0, children: [] };
}

function kindOf(functionName: string, url: string): FrameKind {
  if (functionName === gcName) return 'gc';
  if (url === '') return 'native';
  if (url.startsWith('node:')) return 'node';
  return 'js';
}

/** "url:line", or "" without a url. */
export function locationOf(frame: FlameFrame): string {
  return frame.url ? `${frame.url}:${frame.lineNumber}` : '';
}

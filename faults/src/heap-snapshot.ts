/**
 * Heap snapshots of the soak's processes, to tell the program's own data from V8's metadata.
 *
 * The heap after a full collection, sampled from /metrics, rises for the first 20 to 25 minutes
 * of a process under the soak's load even without V8's code counted, and heap snapshots showed
 * why: V8's bookkeeping of the code it optimises and the feedback it gathers (dependent-code
 * lists, feedback vectors, scope infos, handlers) is not in its code statistics, so it stays in
 * the "objects" figure. A 30-minute run cannot tell that warm-up from a leak of 1 MiB/h by a
 * fitted slope (docs/reliability.md). A snapshot can: it is taken after a full collection that
 * lets go of everything unreachable, and it says what each object is. Two snapshots, after the
 * warm-up and at the end, give the growth of the program's data exactly.
 *
 * The processes are started with `--heapsnapshot-signal` (snapshotNodeOptions); SIGUSR2 makes
 * one write a snapshot into the directory, which is read, summed up and deleted. Writing one
 * stops the process for a second or so, which is why the soak takes them outside its latency
 * windows.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { sleep } from './case';

/** NODE_OPTIONS for a process whose heap may be snapshotted into `dir`. */
export function snapshotNodeOptions(dir: string): string {
  return `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}`;
}

/**
 * What a snapshot holds, in bytes. `program`: what JavaScript creates and could leak (objects,
 * closures and their contexts, strings, numbers, symbols, regexps, arrays' elements and objects'
 * out-of-line properties, and native memory they hold, such as buffers). `v8`: the rest, V8's
 * metadata about the program: code and bytecode with their feedback and scope information
 * (snapshot type "code"), object shapes ("object shape") and V8's internal structures
 * ("hidden", "synthetic", and arrays of its own).
 */
export interface HeapSummary {
  program: number;
  v8: number;
}

const programTypes = new Set(['object', 'closure', 'string', 'concatenated string', 'sliced string', 'number', 'symbol', 'bigint', 'regexp', 'native']);
/** Nodes of other types that hold a JavaScript object's data. */
const programArrays = new Set(['(object elements)', '(object properties)']);
const programHidden = new Set(['system / PropertyArray']);

/** Sums a snapshot's nodes up (the format: V8's heap snapshot JSON, its meta lists the fields). */
export function summarizeHeapSnapshot(snapshot: {
  snapshot: { meta: { node_fields: string[]; node_types: unknown[] } };
  nodes: number[];
  strings: string[];
}): HeapSummary {
  const { meta } = snapshot.snapshot;
  const fields = meta.node_fields.length;
  const typeAt = meta.node_fields.indexOf('type');
  const nameAt = meta.node_fields.indexOf('name');
  const sizeAt = meta.node_fields.indexOf('self_size');
  const typeNames = meta.node_types[0] as string[];
  if (typeAt < 0 || nameAt < 0 || sizeAt < 0 || !Array.isArray(typeNames)) throw new Error('not a V8 heap snapshot: its meta names no type, name or self_size');
  const summary: HeapSummary = { program: 0, v8: 0 };
  const { nodes, strings } = snapshot;
  for (let i = 0; i < nodes.length; i += fields) {
    const type = typeNames[nodes[i + typeAt]!]!;
    const size = nodes[i + sizeAt]!;
    const ours =
      programTypes.has(type) ||
      (type === 'array' && programArrays.has(strings[nodes[i + nameAt]!]!)) ||
      (type === 'hidden' && programHidden.has(strings[nodes[i + nameAt]!]!));
    if (ours) summary.program += size;
    else summary.v8 += size;
  }
  return summary;
}

/**
 * Makes process `pid` (started with snapshotNodeOptions(dir)) write a heap snapshot, waits for it
 * (complete: its JSON closes), sums it up and deletes it. Rejects after `timeoutMs`.
 */
export async function takeHeapSnapshot(pid: number, dir: string, timeoutMs = 60_000): Promise<HeapSummary & { atMs: number }> {
  const ofPid = (file: string) => file.endsWith('.heapsnapshot') && file.split('.')[3] === String(pid);
  const before = new Set(fs.readdirSync(dir).filter(ofPid));
  const atMs = performance.now();
  process.kill(pid, 'SIGUSR2');
  const deadline = atMs + timeoutMs;
  let lastSize = -1;
  while (performance.now() < deadline) {
    await sleep(250);
    const file = fs.readdirSync(dir).find((f) => ofPid(f) && !before.has(f));
    if (!file) continue;
    const full = path.join(dir, file);
    const size = fs.statSync(full).size;
    // Written in pieces: done once its size holds still and its JSON is closed.
    if (size > 0 && size === lastSize && endsJson(full, size)) {
      try {
        return { ...summarizeHeapSnapshot(JSON.parse(fs.readFileSync(full, 'utf8'))), atMs };
      } finally {
        fs.rmSync(full, { force: true });
      }
    }
    lastSize = size;
  }
  throw new Error(`process ${pid} wrote no complete heap snapshot into ${dir} within ${timeoutMs} ms`);
}

function endsJson(file: string, size: number): boolean {
  const fd = fs.openSync(file, 'r');
  try {
    const tail = Buffer.alloc(Math.min(16, size));
    fs.readSync(fd, tail, 0, tail.length, size - tail.length);
    return tail.toString('utf8').trimEnd().endsWith('}');
  } finally {
    fs.closeSync(fd);
  }
}

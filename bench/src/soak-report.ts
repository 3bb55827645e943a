import type { SoakResult } from './soak';
import { formatMachine } from './report/machine';
import { markdownTable } from './report/table';

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

function formatValue(value: number, unit: string): string {
  if (unit === 'bytes') return mib(value);
  if (unit === 'seconds') return `${(value * 1000).toFixed(1)} ms`;
  return value.toFixed(1);
}

export function soakTables(result: SoakResult): string {
  const { soak } = result;
  const tasks = soak.tasks;
  const summary = markdownTable(
    ['minutes', 'lanes / slots', 'tasks', 'ok', 'coded errors', 'lost', 'faults', 'growing series'],
    [
      [
        String(soak.minutes),
        `${soak.lanes} / ${soak.slots}`,
        String(tasks.submitted),
        String(tasks.ok),
        String(tasks.submitted - tasks.ok - tasks.lost - tasks.connectionErrors),
        String(tasks.lost),
        String(soak.faults.length),
        soak.judged ? String(soak.grew.length) : 'not judged (under 10 min)',
      ],
    ],
  );
  const latency = markdownTable(
    ['quarter', 'answered', 'p50 ms', 'p99 ms'],
    soak.latencyByQuarter.map((q, i) => [String(i + 1), String(q.answered), String(q.p50), String(q.p99)]),
  );
  // One row per process kind and metric: the steepest series of each.
  const steepest = new Map<string, (typeof soak.series)[number]>();
  for (const s of soak.series) {
    const [process, metric] = s.name.split('/') as [string, string];
    const key = `${process.split(':')[0]}/${metric}`;
    const held = steepest.get(key);
    // A series that grows is shown before a steeper one that was not judged (too short, say).
    if (!held || (s.grows && !held.grows) || (s.grows === held.grows && s.slopePerHour > held.slopePerHour)) steepest.set(key, s);
  }
  const series = markdownTable(
    ['what (steepest series of its kind)', 'points fitted', 'mean', 'slope per hour', 'grows'],
    [...steepest]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([key, s]) => [
        `${key} (${s.name.split('/')[0]})`,
        String(s.points),
        formatValue(s.mean, s.unit),
        `${s.slopePerHour >= 0 ? '+' : ''}${formatValue(s.slopePerHour, s.unit)}`,
        s.grows ? 'YES' : s.note ? 'no (see below)' : 'no',
      ]),
  );
  const edges = soak.latencyFirstAndLast;
  const firstAndLast = markdownTable(
    ['window', 'answered', 'p50 ms', 'p99 ms'],
    [
      [`first ${edges.minutes} min`, String(edges.first.answered), String(edges.first.p50), String(edges.first.p99)],
      [`last ${edges.minutes} min`, String(edges.last.answered), String(edges.last.p50), String(edges.last.p99)],
      ['last / first', '', '', `${edges.p99Ratio.toFixed(2)}x (at most 1.2x)`],
    ],
  );
  const snapshots = markdownTable(
    ['process (heap snapshots)', 'taken at', "the program's data", 'per hour', "V8's metadata", 'per hour', 'grows'],
    (soak.heapSnapshots ?? []).map((p) => [
      p.process,
      `${p.atSeconds[0]} s, ${p.atSeconds[1]} s`,
      `${mib(p.programBytes[0])} → ${mib(p.programBytes[1])}`,
      `${p.programSlopePerHour >= 0 ? '+' : ''}${(p.programSlopePerHour / 2 ** 20).toFixed(2)} MiB`,
      `${mib(p.v8Bytes[0])} → ${mib(p.v8Bytes[1])}`,
      `${p.v8SlopePerHour >= 0 ? '+' : ''}${(p.v8SlopePerHour / 2 ** 20).toFixed(2)} MiB`,
      p.grows ? 'YES' : 'no',
    ]),
  );
  return [summary, latency, firstAndLast, series, ...((soak.heapSnapshots ?? []).length > 0 ? [snapshots] : [])].join('\n\n');
}

/** The series judged otherwise than their kind (a process with too few full collections), one line each. */
function notedSeries(result: SoakResult): string {
  const noted = result.soak.series.filter((s) => s.note !== undefined && s.points > 0);
  if (noted.length === 0) return '';
  return `\nJudged otherwise: ${noted.map((s) => `${s.name}: ${s.note} (${s.slopePerHour >= 0 ? '+' : ''}${formatValue(s.slopePerHour, s.unit)}/h${s.grows ? ', GROWS' : ''})`).join('; ')}.\n`;
}

export function soakMarkdown(result: SoakResult): string {
  return `## soak

- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}
- Command: \`${result.command}\`
- Setup: the fault suite's soak (faults/src/soak.ts): 3 baseline and 2 candidate workers of 4 slots running the bank integration against the bank simulator, 2 balancers, the control plane and a real Unleash (on the test PostgreSQL), a private Redis; ${result.soak.lanes} clients in a closed loop (70% of the ${result.soak.slots} slots), half the tasks to the candidate. Faults in turn, one every ${Math.min(Math.round((result.soak.minutes * 60) / 5), 300)} s (a fifth of the run, at most 5 min): ${[...new Set(result.soak.faults.map((f) => f.what))].join('; ')}. Every ${result.soak.sampleEveryMs / 1000} s: each process's heap used, heap after its last full collection (\`headroom_heap_after_major_gc_bytes\`) and its two parts, V8's code and bytecode (\`headroom_heap_code_after_major_gc_bytes\`, read at most once a minute) and the rest, the program's objects (\`headroom_heap_objects_after_major_gc_bytes\`), RSS, active handles and event-loop delay p99 (its /metrics), Redis's keys and used memory, each with the latency summaries apart. Slopes are least squares after the first 5 minutes (of the run, and of a process started again, which is a series of its own; Redis's from a minute after its restart on), heap used and RSS through the lowest of every 4 samples, the heap after GC and its parts through their lowest of every 5 minutes (it climbs and falls back over minutes as V8 lets go of code and weakly held objects at a later collection: a leak raises the floor). Heap snapshots of every process after the first 5 minutes (before the fault due then; of a process started again, 5 minutes after it started, unless that falls in the last 5) and at the end (the load still running, after the last latency window), each after the full collection a snapshot makes, split into the program's data (objects, closures and their contexts, strings, arrays' elements, buffers: what JavaScript creates and can leak) and V8's metadata (code, bytecode, feedback, scope infos, object shapes, V8's internal structures: faults/src/heap-snapshot.ts). Fails on: the program's data in a process's heap snapshots growing more than 1 MiB/h (a process without both snapshots, started again after the first: its objects in the heap after GC, fitted, more than 1 MiB/h; V8's code and metadata are reported, not judged: they rise for 20 to 25 minutes as code paths run for the first time and V8 optimises them; a process with fewer than 4 full collections after its warm-up is judged on its heap used instead); Redis's memory besides the latency summaries more than 1 MiB/h; RSS, handles and keys growing more than half their mean per hour and a floor (40 MiB/h, 20 handles/h, 50 keys/h); the latency summaries' keys (one per 10 s slot, kept an hour) passing their bound (370); task latency p99 of the last 5 minutes above 1.2x the first 5's; any task lost. Judged on runs of 10 minutes or more.

${soakTables(result)}

Faults: ${result.soak.faults.map((f) => `${f.atSeconds} s ${f.what}`).join('; ')}.
${notedSeries(result)}${result.soak.grew.length > 0 ? `\nGrew: ${result.soak.grew.join('; ')}.\n` : ''}`;
}

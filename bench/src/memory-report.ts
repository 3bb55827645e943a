import type { MemoryResult, MemorySample } from './memory';
import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { formatSpread, type Spread } from './report/stats';
import { markdownTable } from './report/table';

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
const percent = (share: Spread): Spread => ({ median: share.median * 100, min: share.min * 100, max: share.max * 100 });
const at = (s: MemorySample) => `${s.queued} queued: RSS ${mib(s.rssBytes)}, heap ${mib(s.heapUsedBytes)}`;

export function memoryTables(result: MemoryResult): string {
  const summary = markdownTable(
    [
      'queued at full',
      'RSS at full MiB',
      'heap used at full MiB',
      'RSS bytes per queued task',
      'by step of the fill',
      'heap bytes per queued task',
      'by step of the fill',
      'RSS growth while refusing MiB',
      'heap per refused ÷ per queued task',
      'heap left once the clients left ÷ full',
    ],
    [
      [
        String(result.settings.maxQueuedTasks),
        formatSpread(result.rssAtFullMiB, 0),
        formatSpread(result.heapAtFullMiB, 0),
        formatSpread(result.rssBytesPerQueuedTask, 0),
        formatSpread(result.rssBytesPerQueuedTaskByStep, 0),
        formatSpread(result.heapBytesPerQueuedTask, 0),
        formatSpread(result.heapBytesPerQueuedTaskByStep, 0),
        formatSpread(result.rssGrowthWhileRefusingMiB, 1),
        `${formatSpread(percent(result.heapRetainedPerRefusedOverQueued), 2)}%`,
        `${formatSpread(percent(result.heapLeftAfterCancelShare), 1)}%`,
      ],
    ],
  );
  const steps = markdownTable(
    ['#', 'queued from', 'to', 'RSS bytes per task', 'heap bytes per task'],
    result.runs.flatMap((r) =>
      r.steps.map((step) => [
        String(r.repetition),
        String(step.fromQueued),
        String(step.toQueued),
        step.rssBytesPerQueuedTask.toFixed(0),
        step.heapBytesPerQueuedTask.toFixed(0),
      ]),
    ),
  );
  const perRun = markdownTable(
    [
      '#',
      'empty, after a GC (MiB)',
      'on the way (MiB)',
      'full after s',
      'full, after a GC (MiB)',
      'tasks beyond: answers by code',
      'after the refusals, after a GC (MiB)',
      'after the clients left, after a GC (MiB)',
    ],
    result.runs.map((r) => [
      String(r.repetition),
      at(r.empty),
      r.marks.map(at).join('; '),
      r.fillSeconds.toFixed(1),
      at(r.full),
      Object.entries(r.refusedByCode)
        .map(([code, n]) => `${code} ${n}`)
        .join(', '),
      at(r.afterRefusals),
      at(r.afterCancel),
    ]),
  );
  const repetitions = result.settings.repetitions;
  return [
    `${repetitions} run${repetitions === 1 ? '' : 's'}${repetitions === 1 ? '' : ' (median, min..max), each with a fresh balancer'}. Per queued task = (at full − empty) ÷ tasks queued: everything a waiting call holds (its HTTP/2 stream and gRPC call, the task, its deadline timer, its place in the queue). The fill is read in steps (the marks below); each step gives the same figure again, and "by step" is their median (min..max). Heap figures move with garbage collection; RSS, which V8 and the allocator rarely give back, moves less.`,
    '',
    summary,
    '',
    steps,
    '',
    perRun,
    '',
    goalsTable(result.goals),
  ].join('\n');
}

export function memoryMarkdown(result: MemoryResult): string {
  const s = result.settings;
  return `## memory

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root)
- Setup: 1 balancer (\`--max-queued-tasks ${s.maxQueuedTasks} --metrics-port 0\`, otherwise its defaults: 256 MiB of queued payload at most; node \`--expose-gc\` with \`bench/src/fleet/gc-on-signal.ts\` preloaded, which runs a full GC on SIGUSR2 and does nothing else) and 1 worker at max parallelism 1, each its own process; two load generators, processes too. Every task sleeps ${s.taskSleepMs / 1000} s, so the first holds the only slot all run long and the others wait; their deadline is ${s.callTimeoutMs / 1000} s.
- Load: one generator sends ${s.maxQueuedTasks + 1} tasks at ${s.sendTasksPerSecond} tasks/s (open loop): 1 runs, ${s.maxQueuedTasks} wait. Once they do, the other sends ${s.tasksBeyondLimit} more, which find the queue full. Then the first generator exits, its connection closes, and every waiting call is cancelled. The balancer's \`/metrics\` (\`headroom_balancer_queue_depth\`, \`process_resident_memory_bytes\`, \`nodejs_heap_size_used_bytes\`, \`headroom_balancer_queue_full_total\`) is read every ${s.metricsIntervalMs} ms, and just after a full GC when empty, full, after the refusals and after the clients left: heap then is what the balancer retains. RSS seldom shrinks: V8 and the allocator keep the pages they took.

${memoryTables(result)}
`;
}

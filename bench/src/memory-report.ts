import type { MemoryResult, MemorySample } from './memory';
import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { formatSpread } from './report/stats';
import { markdownTable } from './report/table';

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
const at = (s: MemorySample) => `${s.queued} queued: RSS ${mib(s.rssBytes)}, heap ${mib(s.heapUsedBytes)}`;

export function memoryTables(result: MemoryResult): string {
  const summary = markdownTable(
    ['queued at full', 'RSS at full MiB', 'heap used at full MiB', 'RSS bytes per queued task', 'heap bytes per queued task', 'RSS growth while refusing MiB'],
    [
      [
        String(result.settings.maxQueuedTasks),
        formatSpread(result.rssAtFullMiB, 0),
        formatSpread(result.heapAtFullMiB, 0),
        formatSpread(result.rssBytesPerQueuedTask, 0),
        formatSpread(result.heapBytesPerQueuedTask, 0),
        formatSpread(result.rssGrowthWhileRefusingMiB, 1),
      ],
    ],
  );
  const perRun = markdownTable(
    ['#', 'empty (MiB)', 'on the way (MiB)', 'full after s', 'refused HR_ERR_QUEUE_FULL', 'after the refusals (MiB)', 'after the clients left (MiB)'],
    result.runs.map((r) => [String(r.repetition), at(r.empty), r.marks.map(at).join('; '), r.fillSeconds.toFixed(1), String(r.refusedQueueFull), at(r.afterRefusals), at(r.afterCancel)]),
  );
  const repetitions = result.settings.repetitions;
  return [
    `Median over ${repetitions} run${repetitions === 1 ? '' : 's'} (min..max), each with a fresh balancer. Per queued task = (at full − empty) ÷ tasks queued: everything a waiting call holds (its HTTP/2 stream and gRPC call, the task, its deadline timer, its place in the queue).`,
    '',
    summary,
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
- Setup: 1 balancer (\`--max-queued-tasks ${s.maxQueuedTasks} --metrics-port 0\`, otherwise its defaults: 256 MiB of queued payload at most) and 1 worker at max parallelism 1, each its own process; the load generator is a third. Every task sleeps ${s.taskSleepMs / 1000} s, so the first holds the only slot all run long and the others wait; their deadline is ${s.callTimeoutMs / 1000} s.
- Load: ${s.maxQueuedTasks + 1 + s.tasksBeyondLimit} tasks at ${s.sendTasksPerSecond} tasks/s (open loop): 1 runs, ${s.maxQueuedTasks} wait, ${s.tasksBeyondLimit} find the queue full. The balancer's \`/metrics\` (\`headroom_balancer_queue_depth\`, \`process_resident_memory_bytes\`, \`nodejs_heap_size_used_bytes\`, \`headroom_balancer_queue_full_total\`) is read every ${s.metricsIntervalMs} ms. Then the generator exits, its connection closes, and every waiting call is cancelled; ${s.settleMs} ms later the balancer is read once more.

${memoryTables(result)}
`;
}

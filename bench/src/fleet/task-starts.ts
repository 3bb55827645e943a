/**
 * The workers' own record of the tasks they started: one line per task,
 * `<startedAtUnixMs> <cluster> <deadlineUnixMs> <taskId>`, in one file per worker process under the directory
 * named by HEADROOM_BENCH_TASK_STARTS_DIR. recording-handlers.ts writes it; benchmarks read it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export const taskStartsDirEnv = 'HEADROOM_BENCH_TASK_STARTS_DIR';
export const taskStartsFileSuffix = '.starts';

export interface TaskStart {
  /** Date.now() in the worker when its handler was called. */
  startedAtUnixMs: number;
  cluster: string;
  /** The task's deadline, which the bench's clients set to the time they sent it plus a fixed timeout. */
  deadlineUnixMs: number;
  taskId: string;
}

export function formatTaskStart(start: TaskStart): string {
  return `${start.startedAtUnixMs} ${start.cluster} ${start.deadlineUnixMs} ${start.taskId}\n`;
}

/** Reads, on each call, the records written since the previous one, from every worker's file. */
export class TaskStartReader {
  private readonly offsets = new Map<string, number>();

  constructor(readonly dir: string) {}

  readNew(): TaskStart[] {
    const starts: TaskStart[] = [];
    for (const name of fs.readdirSync(this.dir).filter((file) => file.endsWith(taskStartsFileSuffix))) {
      const file = path.join(this.dir, name);
      const from = this.offsets.get(file) ?? 0;
      const text = readFrom(file, from);
      // A line being written as we read is left for the next call.
      const complete = text.lastIndexOf('\n') + 1;
      this.offsets.set(file, from + Buffer.byteLength(text.slice(0, complete)));
      for (const line of text.slice(0, complete).split('\n')) {
        const [at, cluster, deadline, taskId] = line.split(' ');
        if (at && cluster && deadline && taskId) starts.push({ startedAtUnixMs: Number(at), cluster, deadlineUnixMs: Number(deadline), taskId });
      }
    }
    return starts;
  }
}

function readFrom(file: string, offset: number): string {
  const fd = fs.openSync(file, 'r');
  try {
    const length = fs.fstatSync(fd).size - offset;
    if (length <= 0) return '';
    const buffer = Buffer.alloc(length);
    const read = fs.readSync(fd, buffer, 0, length, offset);
    return buffer.toString('utf8', 0, read);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Worker handlers (--handlers) for benchmarks that check where tasks ran from the workers'
 * side: the demo handlers, each first noting the task's start in the file of this worker
 * process (see task-starts.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { HandlerMap, TaskHandler } from '@headroom/worker';
import { handlers as demoHandlers } from '@headroom/sim/handlers/demo';
import { formatTaskStart, taskStartsDirEnv, taskStartsFileSuffix } from './task-starts';

const dir = process.env[taskStartsDirEnv];
if (!dir) throw new Error(`${taskStartsDirEnv} is not set: name the directory for the task-start records`);
const fd = fs.openSync(path.join(dir, `${process.pid}${taskStartsFileSuffix}`), 'a');

function recorded(handler: TaskHandler): TaskHandler {
  return (task, signal) => {
    // Synchronous: the record exists before the task runs, whatever happens to the worker next.
    fs.writeSync(fd, formatTaskStart({ startedAtUnixMs: Date.now(), cluster: task.cluster, deadlineUnixMs: task.deadlineUnixMs, taskId: task.id }));
    return handler(task, signal);
  };
}

export const handlers: HandlerMap = Object.fromEntries(Object.entries(demoHandlers).map(([integration, handler]) => [integration, recorded(handler)]));

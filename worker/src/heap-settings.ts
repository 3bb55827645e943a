import { spawn } from 'node:child_process';
import { settings } from '@headroom/common';

/**
 * V8 heap sizes for a worker. They must be set when Node starts, so the CLI starts itself
 * again with them when they are asked for and not yet in effect. A parallel worker makes
 * more short-lived garbage: a larger semi-space (young generation) means fewer scavenges.
 */
export const heapSettingsShape = {
  /** V8 --max-old-space-size, in MiB (the old generation's limit). */
  maxOldSpaceSizeMb: settings.positiveInt(1_048_576).optional(),
  /** V8 --max-semi-space-size, in MiB (each of the young generation's two halves). */
  maxSemiSpaceSizeMb: settings.positiveInt(1024).optional(),
};

export interface HeapSettings {
  maxOldSpaceSizeMb?: number | undefined;
  maxSemiSpaceSizeMb?: number | undefined;
}

const appliedMarker = 'HEADROOM_HEAP_SETTINGS_APPLIED';

export function v8HeapFlags(heap: HeapSettings): string[] {
  const flags: string[] = [];
  if (heap.maxOldSpaceSizeMb !== undefined) flags.push(`--max-old-space-size=${heap.maxOldSpaceSizeMb}`);
  if (heap.maxSemiSpaceSizeMb !== undefined) flags.push(`--max-semi-space-size=${heap.maxSemiSpaceSizeMb}`);
  return flags;
}

/**
 * When heap flags are asked for and this process was not started with them, runs the same
 * command again with them, forwards stop signals, and exits as the child does (never
 * resolving). Resolves when this process should go on itself.
 */
export async function restartWithHeapFlags(heap: HeapSettings): Promise<void> {
  const flags = v8HeapFlags(heap);
  if (process.env[appliedMarker] === '1') {
    stopWithRestarter();
    return;
  }
  if (flags.length === 0) return;
  const child = spawn(process.execPath, [...process.execArgv, ...flags, ...process.argv.slice(1)], {
    // The IPC channel tells the child when this process is gone, even by SIGKILL (stopWithRestarter).
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, [appliedMarker]: '1' },
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
  await new Promise<never>(() => {
    child.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 + 15 : 1)));
  });
}

/**
 * In the process restartWithHeapFlags started: stops it (SIGTERM, the graceful way) once the
 * process that started it is gone, so that a SIGKILL of the command leaves no worker behind.
 */
function stopWithRestarter(): void {
  const channel = process.channel;
  if (!channel) return;
  channel.unref();
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
}

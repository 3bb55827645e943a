import type { Redis } from 'ioredis';

/** Redis's accounting of itself: its main thread's CPU and the time in each command. */
export interface RedisAccounting {
  mainThreadCpuUs: number;
  commands: Map<string, { calls: number; usec: number }>;
}

export async function readAccounting(redis: Redis): Promise<RedisAccounting> {
  const [cpu, commandstats] = await Promise.all([redis.info('cpu'), redis.info('commandstats')]);
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? Number.NaN);
  const commands = new Map<string, { calls: number; usec: number }>();
  for (const match of commandstats.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm))
    commands.set(match[1]!, { calls: Number(match[2]), usec: Number(match[3]) });
  return { mainThreadCpuUs: (field('used_cpu_user_main_thread') + field('used_cpu_sys_main_thread')) * 1e6, commands };
}

/** What Redis spent between two readings. */
export interface RedisSpent {
  mainThreadCpuUs: number;
  /** Commands, by name: calls and microseconds inside them (a script's own commands count in the script's time, and again under their own names). */
  commands: Record<string, { calls: number; usec: number }>;
}

export function spentBetween(before: RedisAccounting, after: RedisAccounting): RedisSpent {
  const commands: RedisSpent['commands'] = {};
  for (const [name, now] of after.commands) {
    const then = before.commands.get(name) ?? { calls: 0, usec: 0 };
    if (now.calls > then.calls) commands[name] = { calls: now.calls - then.calls, usec: now.usec - then.usec };
  }
  return { mainThreadCpuUs: after.mainThreadCpuUs - before.mainThreadCpuUs, commands };
}

import * as path from 'node:path';
import type { RedisConnection } from '@headroom/fleet';
import { defineScripts, loadScripts } from '@headroom/fleet';

/** The control plane's Lua scripts (one per file, `<name>-<numKeys>.lua`). */
const luaDir = path.join(__dirname, '..', '..', 'lua');

export type ControlScript = 'profile-lock-acquire' | 'profile-lock-release' | 'last-rollback-update' | 'autopilot-lease' | 'rollout-write';

/** Registers the scripts on `redis` (once per connection) and returns a caller of them. */
export function controlScripts(redis: RedisConnection): (script: ControlScript, args: (string | number)[]) => Promise<unknown> {
  defineScripts(redis, loadScripts(luaDir));
  type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;
  return (script, args) => (redis as unknown as Record<string, ScriptFn>)[script]!.call(redis, ...args);
}

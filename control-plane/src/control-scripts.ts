import * as path from 'node:path';
import type { RedisConnection } from '@headroom/fleet';
import { LuaScripts } from '@headroom/fleet';

/** The control plane's Lua scripts (one per file, `<name>-<numKeys>.lua`). */
const luaDir = path.join(__dirname, '..', '..', 'lua');

export type ControlScript = 'profile-lock-acquire' | 'profile-lock-release' | 'last-rollback-update' | 'autopilot-lease' | 'rollout-write' | 'limit-sample';

/** A caller of the control plane's scripts on `redis`. */
export function controlScripts(redis: RedisConnection): (script: ControlScript, args: (string | number)[]) => Promise<unknown> {
  const scripts = LuaScripts.of(luaDir);
  return (script, args) => scripts.run(redis, script, args);
}

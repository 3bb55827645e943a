// FROZEN COPY of fleet/src/script-loader.ts as it was before the ledger's redesign around lease records (the "old
// scripts"). Used only by the scale benchmark's fleet-scale mode to compare old against new in one
// run; not production code, never imported outside bench/src/scale/. Do not change or fix it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Redis } from 'ioredis';

/**
 * Where the frozen scripts live: one script per file, named `<name>-<numKeys>.lua`. They are not
 * compiled, so from bench/dist/src/scale/legacy-ledger/ they are found in the sources, next to this file's .ts
 * (as fleet/dist/src/script-loader.js finds fleet/lua).
 */
export const luaDir = path.resolve(__dirname, '..', '..', '..', '..', 'src', 'scale', 'legacy-ledger', 'lua');

export interface LuaScript {
  readonly name: string;
  readonly numberOfKeys: number;
  readonly source: string;
}

/** Reads every script in `dir`, pasting in the shared code named by `--@include <name>` lines. */
export function loadScripts(dir = luaDir): LuaScript[] {
  if (!fs.existsSync(dir)) throw new Error(`the legacy ledger's Lua scripts are not at ${dir} (bench/src/scale/legacy-ledger/lua)`);
  return fs
    .readdirSync(dir)
    .filter((file) => file.endsWith('.lua'))
    .map((file) => {
      const match = /^(.+)-(\d+)\.lua$/.exec(file);
      if (!match) throw new Error(`Lua script ${file} is not named <name>-<numKeys>.lua`);
      const source = fs
        .readFileSync(path.join(dir, file), 'utf8')
        .replace(/^--@include (\S+)$/gm, (_line, include: string) => fs.readFileSync(path.join(dir, 'includes', `${include}.lua`), 'utf8'));
      return { name: match[1]!, numberOfKeys: Number(match[2]), source };
    });
}

/**
 * Registers each script as a command on `redis` (ioredis sends EVALSHA and falls back to
 * EVAL on NOSCRIPT, so scripts survive a Redis restart or SCRIPT FLUSH).
 */
export function defineScripts(redis: Redis, scripts: readonly LuaScript[] = loadScripts()): void {
  for (const script of scripts) {
    if (typeof (redis as unknown as Record<string, unknown>)[script.name] === 'function') continue;
    redis.defineCommand(script.name, { numberOfKeys: script.numberOfKeys, lua: script.source });
  }
}

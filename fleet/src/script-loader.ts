import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { RedisConnection } from './redis';

/** Where the ledger's Lua scripts live: one script per file, named `<name>-<numKeys>.lua`. */
export const luaDir = path.join(__dirname, '..', '..', 'lua');

export interface LuaScript {
  readonly name: string;
  readonly numberOfKeys: number;
  readonly source: string;
}

/** Reads every script in `dir`, pasting in the shared code named by `--@include <name>` lines. */
export function loadScripts(dir = luaDir): LuaScript[] {
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
 * The scripts of a directory, read once per process, run by EVALSHA with EVAL when Redis does
 * not hold them (after a restart, a failover or SCRIPT FLUSH; EVAL caches them again).
 *
 * Not ioredis's defineCommand: a command defined on a connection is missing from an
 * auto-pipeline created before it, and ioredis then matches that pipeline's replies to the
 * wrong callers and throws where no caller can catch it (redis/ioredis#1931). A process that
 * defined a script while its commands were in flight could crash; EVALSHA and EVAL are on
 * every pipeline.
 */
export class LuaScripts {
  private static readonly byDir = new Map<string, LuaScripts>();
  private readonly byName: Map<string, LuaScript & { sha1: string }>;

  /** The scripts in `dir` (a handful of directories per process: each read once and kept). */
  static of(dir = luaDir): LuaScripts {
    let scripts = LuaScripts.byDir.get(dir);
    if (!scripts) {
      scripts = new LuaScripts(loadScripts(dir));
      LuaScripts.byDir.set(dir, scripts);
    }
    return scripts;
  }

  constructor(scripts: readonly LuaScript[]) {
    this.byName = new Map(scripts.map((script) => [script.name, { ...script, sha1: createHash('sha1').update(script.source).digest('hex') }]));
  }

  /** Runs `name` with its keys first, then its other arguments (numberOfKeys, from its file name, says where the keys end). */
  async run(redis: RedisConnection, name: string, args: readonly (string | number)[]): Promise<unknown> {
    const script = this.byName.get(name);
    if (!script) throw new Error(`no Lua script named ${name} (there are: ${[...this.byName.keys()].join(', ')})`);
    try {
      return await redis.evalsha(script.sha1, script.numberOfKeys, ...args);
    } catch (error) {
      // NOSCRIPT: Redis ran nothing, so running it whole is safe.
      if (!(error instanceof Error && error.message.includes('NOSCRIPT'))) throw error;
      return redis.eval(script.source, script.numberOfKeys, ...args);
    }
  }
}

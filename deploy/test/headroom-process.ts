/**
 * A Headroom process as a deployment file describes it (a compose service, a Kubernetes
 * container), and what its CLI really accepts: the flags and env variables its `--help` lists,
 * read at test time, plus the few variables its modules read directly.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deployDir } from './artefacts';

export const repoRoot = path.resolve(deployDir, '..');

export interface HeadroomProcess {
  /** For messages, e.g. "compose service worker-baseline". */
  where: string;
  /** The CLI, relative to the repository (the image's working directory), e.g. worker/dist/src/cli.js. */
  script: string;
  /** Arguments after the script. */
  args: string[];
  /** Env variables it is given; undefined where the value is only known at run time (a Secret, the pod IP). */
  env: Record<string, string | undefined>;
}

export interface CliOption {
  flag: string;
  env?: string;
  /** The numeric default the help text states, if any. */
  defaultNumber?: number;
}

/** A CLI's options, from its `--help` (each line `--flag VALUE description (env NAME)`). */
export type CliContract = Map<string, CliOption>;

const contracts = new Map<string, CliContract>();

export function cliContract(script: string): CliContract {
  const cached = contracts.get(script);
  if (cached) return cached;
  const file = path.join(repoRoot, script);
  if (!fs.existsSync(file)) {
    throw new Error(`${script} does not exist: the CLI is not built (npx tsc --build) or not written yet`);
  }
  const help = spawnSync(process.execPath, [file, '--help'], { encoding: 'utf8', timeout: 20_000, cwd: repoRoot });
  if (help.status !== 0) throw new Error(`node ${script} --help exited with ${help.status}: ${help.stderr}`);
  const contract: CliContract = new Map();
  for (const line of help.stdout.split('\n')) {
    const flag = /^\s+--([a-z0-9-]+)/.exec(line)?.[1];
    if (!flag || flag === 'help') continue;
    const env = /\(env ([A-Z][A-Z0-9_]*)\)\s*$/.exec(line)?.[1];
    const defaultNumber = /\(default (\d+)\b/.exec(line)?.[1];
    contract.set(flag, { flag, ...(env ? { env } : {}), ...(defaultNumber ? { defaultNumber: Number(defaultNumber) } : {}) });
  }
  if (contract.size === 0) throw new Error(`node ${script} --help lists no options:\n${help.stdout}`);
  contracts.set(script, contract);
  return contract;
}

/**
 * Env variables a Headroom process may be given although its `--help` does not list them,
 * because a module reads them directly; `readEnvNames` checks that one really does.
 */
export const directlyReadEnv: Record<string, string> = {
  NODE_OPTIONS: 'read by node itself',
  LOG_LEVEL: 'the log level of common/src/logger.ts',
  HEADROOM_BANK_URL: 'the bank simulator that sim/src/handlers/bank.ts calls',
};

const requirePattern = /\brequire\("([^"]+)"\)/g;
// process.env.NAME, or the name as a string (env['NAME'], const nameEnv = 'NAME').
const envReadPattern = /process\.env\.([A-Z_][A-Z0-9_]*)|["'`]([A-Z][A-Z0-9]*_[A-Z0-9_]+)["'`]/g;

/**
 * The env variables a compiled module and every Headroom module it requires name, as
 * `process.env.NAME` or as a string: a grep, not a proof that they are read. Third-party
 * packages are not followed.
 */
export function readEnvNames(entryFiles: readonly string[]): Set<string> {
  const names = new Set<string>();
  const seen = new Set<string>();
  const pending = entryFiles.map((file) => fs.realpathSync(file));
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    const code = fs.readFileSync(file, 'utf8');
    for (const match of code.matchAll(envReadPattern)) names.add((match[1] ?? match[2])!);
    for (const [, specifier] of code.matchAll(requirePattern)) {
      if (specifier!.startsWith('node:')) continue;
      let resolved: string;
      try {
        resolved = fs.realpathSync(require.resolve(specifier!, { paths: [path.dirname(file)] }));
      } catch {
        continue; // a builtin without the node: prefix, or an optional dependency
      }
      if (resolved.startsWith(repoRoot) && !resolved.includes(`${path.sep}node_modules${path.sep}`) && resolved.endsWith('.js')) pending.push(resolved);
    }
  }
  return names;
}

/** The value of a CLI option: the flag if given, else its env variable ("" counts as unset, as readOptions does). */
export function optionValue(proc: HeadroomProcess, flag: string): string | undefined {
  const at = proc.args.indexOf(`--${flag}`);
  if (at >= 0) return proc.args[at + 1];
  const env = cliContract(proc.script).get(flag)?.env;
  const value = env === undefined ? undefined : proc.env[env];
  return value === '' ? undefined : value;
}

export function isSet(proc: HeadroomProcess, flag: string): boolean {
  const env = cliContract(proc.script).get(flag)?.env;
  return proc.args.includes(`--${flag}`) || (env !== undefined && env in proc.env);
}

/** A numeric option: its value, or the default its help states. */
export function numericOption(proc: HeadroomProcess, flag: string): number | undefined {
  const value = optionValue(proc, flag);
  return value === undefined ? cliContract(proc.script).get(flag)?.defaultNumber : Number(value);
}

/** The handlers module a worker loads, relative to the repository. */
export function handlersModule(proc: HeadroomProcess): string | undefined {
  return cliContract(proc.script).has('handlers') ? optionValue(proc, 'handlers') : undefined;
}

/**
 * Problems with a process's command and settings: a CLI that is not built, a flag or an env
 * variable it does not read, a handlers module that does not exist. Empty when all is well.
 */
export function settingProblems(proc: HeadroomProcess): string[] {
  const contract = cliContract(proc.script);
  const problems: string[] = [];
  const listed = new Set([...contract.values()].flatMap((option) => (option.env ? [option.env] : [])));
  for (const arg of proc.args) {
    const flag = /^--([a-z0-9-]+)$/.exec(arg)?.[1];
    if (flag && !contract.has(flag)) problems.push(`${proc.where}: ${proc.script} has no flag --${flag}`);
  }
  const handlers = handlersModule(proc);
  const modules = [path.join(repoRoot, proc.script)];
  if (handlers !== undefined) {
    const file = path.join(repoRoot, handlers);
    if (fs.existsSync(file)) modules.push(file);
    else problems.push(`${proc.where}: the handlers module ${handlers} does not exist (not built, or not written yet)`);
  }
  const unlisted = Object.keys(proc.env).filter((name) => !listed.has(name));
  const readDirectly = unlisted.length > 0 ? readEnvNames(modules) : new Set<string>();
  for (const name of unlisted) {
    const why = directlyReadEnv[name];
    if (why === undefined) problems.push(`${proc.where}: ${name} is not an env variable of ${proc.script} (see its --help)`);
    else if (name !== 'NODE_OPTIONS' && !readDirectly.has(name))
      problems.push(`${proc.where}: ${name} (${why}) is read by none of ${proc.script}'s modules${handlers ? ` nor ${handlers}` : ''}`);
  }
  return problems;
}

/** The ports a process listens on: every `--port` / `--*-port` option that is set or has a non-zero default. */
export function listenPorts(proc: HeadroomProcess): number[] {
  return [...cliContract(proc.script).keys()]
    .filter((flag) => flag === 'port' || flag.endsWith('-port'))
    .map((flag) => numericOption(proc, flag))
    .filter((port): port is number => port !== undefined && port !== 0)
    .sort((a, b) => a - b);
}

/** The interface it listens on (`--host` / `--*-host`, not the host it advertises). */
export function listenHost(proc: HeadroomProcess): string | undefined {
  const flag = [...cliContract(proc.script).keys()].find((f) => (f === 'host' || f.endsWith('-host')) && f !== 'advertise-host');
  return flag === undefined ? undefined : optionValue(proc, flag);
}

/**
 * A command as a container runs it: `node <script> [args]`, or a shell that sets env variables
 * and then execs node (`sh -c 'NAME="$(...)" exec node <script> [args]'`).
 */
export function parseCommand(where: string, command: readonly string[], env: HeadroomProcess['env']): HeadroomProcess {
  if (command[0] === 'node' && command[1]) return { where, script: command[1], args: command.slice(2), env };
  if ((command[0] === 'sh' || command[0] === '/bin/sh') && command[1] === '-c' && command.length === 3) {
    const match = /^((?:[A-Z_][A-Z0-9_]*=(?:"[^"]*"|'[^']*'|[^\s"']+)\s+)*)exec\s+node\s+(\S+)((?:\s+\S+)*)\s*$/.exec(command[2]!);
    if (match) {
      const assigned = Object.fromEntries([...match[1]!.matchAll(/([A-Z_][A-Z0-9_]*)=/g)].map(([, name]) => [name!, undefined]));
      return { where, script: match[2]!, args: match[3]!.trim().split(/\s+/).filter(Boolean), env: { ...env, ...assigned } };
    }
  }
  throw new Error(`${where}: the command ${JSON.stringify(command)} is neither ["node", script, ...] nor ["sh", "-c", "NAME=... exec node script ..."]`);
}

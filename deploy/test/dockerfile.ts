/**
 * The root Dockerfile as the tests read it: its stages and instructions, and a replay of one
 * stage's COPY and RUN instructions in a directory, with no Docker engine (the build stage's
 * /app is this repository, built).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from './headroom-process';

export const dockerfilePath = path.join(repoRoot, 'Dockerfile');
export const dockerignorePath = path.join(repoRoot, '.dockerignore');

export interface Instruction {
  keyword: string;
  /** Everything after the keyword, continuation lines joined. */
  args: string;
  line: number;
}

export interface Stage {
  name: string | undefined;
  base: string;
  instructions: Instruction[];
}

export function readInstructions(file = dockerfilePath): Instruction[] {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const instructions: Instruction[] = [];
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let text = lines[i]!.trim();
    if (text === '' || text.startsWith('#')) continue;
    while (text.endsWith('\\') && i + 1 < lines.length) {
      i++;
      const next = lines[i]!.trim();
      if (!next.startsWith('#')) text = `${text.slice(0, -1).trimEnd()} ${next}`;
    }
    const [keyword = '', ...rest] = text.split(/\s+/);
    instructions.push({ keyword: keyword.toUpperCase(), args: rest.join(' '), line: start + 1 });
  }
  return instructions;
}

/** Stages in order; global ARG defaults substituted in FROM. */
export function readStages(file = dockerfilePath): Stage[] {
  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const instruction of readInstructions(file)) {
    if (instruction.keyword === 'FROM') {
      const [base = '', as, name] = instruction.args.split(/\s+/);
      const resolved = base.replace(/\$\{?(\w+)\}?/g, (_whole, arg: string) => globalArgs.get(arg) ?? '');
      stages.push({ name: as?.toUpperCase() === 'AS' ? name : undefined, base: resolved, instructions: [] });
    } else if (stages.length === 0 && instruction.keyword === 'ARG') {
      const [arg, value = ''] = instruction.args.split('=');
      globalArgs.set(arg!, value);
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return stages;
}

export interface CopyInstruction {
  from: string | undefined;
  sources: string[];
  destination: string;
}

export function parseCopy(instruction: Instruction): CopyInstruction {
  const words = instruction.args.split(/\s+/);
  const flags = words.filter((word) => word.startsWith('--'));
  const paths = words.filter((word) => !word.startsWith('--'));
  if (paths.length < 2) throw new Error(`Dockerfile line ${instruction.line}: COPY needs a source and a destination`);
  const from = flags.find((flag) => flag.startsWith('--from='))?.slice('--from='.length);
  return { from, sources: paths.slice(0, -1), destination: paths.at(-1)! };
}

/** A RUN's shell command, without its BuildKit flags (--mount=..., --network=...). */
export function runCommand(instruction: Instruction): string {
  return instruction.args.replace(/^(?:--[a-z-]+=\S+\s+)+/, '');
}

/**
 * Carries out a stage's WORKDIR /app, ENV, COPY and RUN instructions in `dir`: context sources
 * and the build stage's /app come from this repository. Returns the USER the stage ends with.
 * `extraEnv` is added to every RUN (e.g. npm settings for the test machine).
 */
export function replayStage(stage: Stage, dir: string, extraEnv: Record<string, string> = {}): { user: string | undefined } {
  const env: Record<string, string> = {};
  let user: string | undefined;
  for (const instruction of stage.instructions) {
    const where = `Dockerfile line ${instruction.line}`;
    switch (instruction.keyword) {
      case 'WORKDIR':
        if (instruction.args !== '/app') throw new Error(`${where}: the replay knows WORKDIR /app only`);
        break;
      case 'ENV': {
        for (const [, name, value] of instruction.args.matchAll(/(\w+)=(\S+)/g)) env[name!] = value!;
        break;
      }
      case 'COPY': {
        const copy = parseCopy(instruction);
        for (const source of copy.sources) {
          const from = copy.from === undefined ? path.join(repoRoot, source) : path.join(repoRoot, path.relative('/app', source));
          if (!fs.existsSync(from)) throw new Error(`${where}: ${copy.from ? `stage ${copy.from}'s ` : ''}${source} does not exist (${from})`);
          const into =
            copy.destination.endsWith('/') || copy.destination === '.' || copy.destination === './'
              ? path.join(dir, copy.destination, path.basename(source))
              : path.join(dir, copy.destination);
          fs.mkdirSync(path.dirname(into), { recursive: true });
          fs.cpSync(from, into, { recursive: true });
        }
        break;
      }
      case 'RUN': {
        const command = runCommand(instruction);
        const result = spawnSync('sh', ['-c', command], { cwd: dir, encoding: 'utf8', timeout: 300_000, env: { ...process.env, ...env, ...extraEnv } });
        if (result.status !== 0) throw new Error(`${where}: RUN ${command} exited with ${result.status}:\n${result.stdout}${result.stderr}`);
        break;
      }
      case 'USER':
        user = instruction.args;
        break;
      default:
        throw new Error(`${where}: the replay does not know ${instruction.keyword}`);
    }
  }
  return { user };
}

import type { TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const runScript = path.join(__dirname, '..', 'src', 'run.js');

/**
 * Runs one benchmark in smoke mode as its own process, as `npm run bench -- NAME --smoke` would,
 * checks that it exited 0, and returns the JSON it wrote. After `timeoutMs` it gets SIGTERM,
 * which lets it stop what it started and delete its keys.
 */
export async function runSmoke<Result>(t: TestContext, benchmark: string, timeoutMs: number): Promise<Result> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hr-bench-smoke-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const outPath = path.join(dir, `${benchmark}.json`);
  const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(process.execPath, [runScript, benchmark, '--smoke', '--out', outPath], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
  assert.equal(code, 0, `the benchmark exited with ${code}:\n${output}`);
  return JSON.parse(fs.readFileSync(outPath, 'utf8')) as Result;
}

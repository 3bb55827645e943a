/**
 * docs/adopting.md's proxyless caller, run as a user would: the code block as written, by node,
 * against a worker on the ledger it names (prefix `hr`, on a private Redis so as to share no keys).
 * It must place its task, print the result and exit by itself.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startFleet, startPrivateRedis } from '@headroom/testkit';

const repoRoot = path.join(__dirname, '..', '..', '..');
/** It runs one task: far less than this, on a loaded machine too. */
const exitWithinMs = 30_000;

/** The first ```js block of the page that starts with `// <file>`. */
function codeBlock(markdown: string, file: string): string {
  const block = [...markdown.matchAll(/```js\n([\s\S]*?)```/g)].map((match) => match[1]!).find((code) => code.startsWith(`// ${file}\n`));
  assert.ok(block, `docs/adopting.md has a js block starting with "// ${file}"`);
  return block;
}

/** Runs `code` by node from the repository root (so that @headroom/* resolve), fed on stdin. */
function runNode(code: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-'], { cwd: repoRoot, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), exitWithinMs);
    child.on('close', (exitCode, signal) => {
      clearTimeout(timer);
      resolve({ code: exitCode, signal, stdout, stderr });
    });
    child.stdin.end(code);
  });
}

test("docs/adopting.md's proxyless caller runs as written: it places its task, prints the result and exits by itself", async (t) => {
  const redis = await startPrivateRedis();
  t.after(() => redis.stop(true));
  const fleet = await startFleet(t, { keyPrefix: 'hr' }, redis.url);
  await fleet.addWorker(
    { cluster: 'baseline', workerId: 'docs-worker', maxParallelism: 2 },
    {
      'bank-a': async (task) => `balance of ${String(JSON.parse(task.payload.toString()).accountId)}`,
    },
  );
  const code = codeBlock(fs.readFileSync(path.join(repoRoot, 'docs', 'adopting.md'), 'utf8'), 'caller.js');
  const run = await runNode(code, { ...process.env, REDIS_URL: redis.url, LOG_LEVEL: 'warn' });
  assert.equal(run.signal, null, `it did not exit within ${exitWithinMs} ms (killed):\n${run.stdout}\n${run.stderr}`);
  assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
  assert.match(run.stdout, /^balance of account-42 \(ran on docs-worker\)$/m);
});

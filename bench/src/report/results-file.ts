import * as fs from 'node:fs';
import * as path from 'node:path';

/** bench/ itself (this file compiles to bench/dist/src/report/). */
export const benchDir = path.resolve(__dirname, '..', '..', '..');
export const resultsDir = path.join(benchDir, 'results');
export const resultsMarkdownPath = path.join(benchDir, 'RESULTS.md');

export function writeJson(filePath: string, value: unknown): void {
  fs.mkdirSync(path.dirname(filePath), { recursive: true });
  fs.writeFileSync(filePath, `${JSON.stringify(value, null, 2)}\n`);
}

const preamble = `# Benchmark results

Written by \`npm run bench\` (bench/src/run.ts); each benchmark refreshes its own section.
Timing never fails a build: these figures are for reading, and for comparing runs on the same machine.
`;

/**
 * Replaces the section `name` of bench/RESULTS.md (between its marker comments), keeping the
 * others; when missing, appends it, or with `atTop` puts it first, right after the preamble.
 */
export function updateResultsSection(name: string, markdown: string, filePath = resultsMarkdownPath, atTop = false): void {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const section = `${start}\n${markdown.trim()}\n${end}`;
  const current = fs.existsSync(filePath) ? fs.readFileSync(filePath, 'utf8') : preamble;
  const from = current.indexOf(start);
  const to = current.indexOf(end);
  let next: string;
  if (from >= 0 && to > from) {
    next = `${current.slice(0, from)}${section}${current.slice(to + end.length)}`;
  } else if (atTop) {
    // The preamble ends where the first section (its marker or its heading) begins.
    const firstSection = [current.indexOf('<!-- '), current.indexOf('\n## ')].filter((i) => i >= 0);
    const at = firstSection.length > 0 ? Math.min(...firstSection) : current.length;
    next = `${current.slice(0, at).trimEnd()}\n\n${section}\n\n${current.slice(at).trimStart()}`;
  } else {
    next = `${current.trimEnd()}\n\n${section}\n`;
  }
  fs.writeFileSync(filePath, next);
}

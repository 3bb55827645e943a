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
 * Replaces the section of `benchmark` in bench/RESULTS.md (between its marker comments),
 * keeping the other benchmarks' sections; appends it when missing.
 */
export function updateResultsSection(benchmark: string, markdown: string, filePath = resultsMarkdownPath): void {
  const start = `<!-- ${benchmark}:start -->`;
  const end = `<!-- ${benchmark}:end -->`;
  const section = `${start}\n${markdown.trim()}\n${end}`;
  const current = fs.existsSync(filePath) ? fs.readFileSync(filePath, 'utf8') : preamble;
  const from = current.indexOf(start);
  const to = current.indexOf(end);
  const next = from >= 0 && to > from ? `${current.slice(0, from)}${section}${current.slice(to + end.length)}` : `${current.trimEnd()}\n\n${section}\n`;
  fs.writeFileSync(filePath, next);
}

#!/usr/bin/env node
// Sentence lengths of markdown files, for keeping the docs readable.
// Usage: node scripts/sentence-stats.mjs [--over N] README.md docs/*.md
// Prints per file: lines, sentences, median and longest sentence in words.
// --over N also lists every sentence longer than N words, to find the ones to split.
// Code blocks, tables, headings and image-only lines are ignored. Each list item starts a
// sentence; a sentence ends at . ! or ? (and any closing ** ) " ` after it) followed by a space,
// or at the end of its paragraph.
import { readFileSync } from 'node:fs';

/** The prose blocks of a markdown text: paragraphs and list items, each as one string. */
function proseBlocks(markdown) {
  const blocks = [];
  let current = [];
  let inFence = false;
  const flush = () => {
    if (current.length > 0) blocks.push(current.join(' '));
    current = [];
  };
  for (const line of markdown.split('\n')) {
    const trimmed = line.trim();
    if (/^(```|~~~)/.test(trimmed)) {
      flush();
      inFence = !inFence;
      continue;
    }
    if (inFence) continue;
    if (trimmed === '' || trimmed.startsWith('#') || trimmed.startsWith('|') || /^!\[[^\]]*\]\([^)]*\)$/.test(trimmed)) {
      flush();
      continue;
    }
    const item = /^(?:[-*+]|\d+[.)])\s+(.*)$/.exec(trimmed);
    if (item) {
      flush();
      current.push(item[1]);
      continue;
    }
    current.push(trimmed);
  }
  flush();
  return blocks;
}

/** The sentences of one prose block, each with its length in words. */
function sentences(block) {
  return block
    .split(/(?<=[.!?][*_)"'’”`]*)\s+/)
    .map((text) => ({ text, words: text.split(/\s+/).filter((word) => /[\p{L}\p{N}]/u.test(word)).length }))
    .filter((sentence) => sentence.words > 0);
}

function median(values) {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

const args = process.argv.slice(2);
let over = Infinity;
const overAt = args.indexOf('--over');
if (overAt !== -1) {
  over = Number(args[overAt + 1]);
  args.splice(overAt, 2);
}
const files = args;
if (files.length === 0 || (!Number.isFinite(over) && overAt !== -1)) {
  process.stderr.write('usage: node scripts/sentence-stats.mjs [--over N] FILE.md...\n');
  process.exit(2);
}
const long = [];
const rows = [['file', 'lines', 'sentences', 'median', 'longest']];
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const lines = text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
  const found = proseBlocks(text).flatMap(sentences);
  const lengths = found.map((sentence) => sentence.words);
  for (const sentence of found) if (sentence.words > over) long.push(`${file} (${sentence.words}): ${sentence.text}`);
  rows.push([file, String(lines), String(lengths.length), String(median(lengths)), String(lengths.length ? Math.max(...lengths) : 0)]);
}
const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
for (const row of rows) {
  process.stdout.write(row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ') + '\n');
}
if (long.length > 0) process.stdout.write('\n' + long.join('\n') + '\n');

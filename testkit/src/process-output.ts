/**
 * What a child process writes, read line by line within bounds: a JSON line with an `event`
 * is a report to whoever started it, a pino record is a log line for people, anything else is
 * plain text. And how it ended. See node-process.ts.
 */
import type { Readable } from 'node:stream';

/** How a child process ended: its exit code, or the signal that ended it. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export function describeExit(exit: ProcessExit): string {
  return exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
}

/** A JSON line with a string `event` field: how Headroom's commands report (`{"event":"ready",...}` first). */
export type ProcessEvent = Record<string, unknown> & { event: string };

export type OutputLine =
  | { kind: 'event'; event: ProcessEvent }
  /** A pino record, `text` formatted for people ("WARN message {fields}"). */
  | { kind: 'log'; level: number; text: string }
  | { kind: 'text'; text: string };

/** pino's level numbers. */
export const pinoLevels = { warn: 40 } as const;
const levelNames: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every pino record has: left out of the formatted line. */
const pinoBookkeeping = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

/** Sorts one line of a child's stdout (its stderr is plain text throughout). */
export function classifyStdoutLine(line: string): OutputLine {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return { kind: 'text', text: line };
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return { kind: 'text', text: line };
  const record = parsed as Record<string, unknown>;
  if (typeof record.level === 'number') return { kind: 'log', level: record.level, text: formatLogRecord(record) };
  if (typeof record.event === 'string') return { kind: 'event', event: record as ProcessEvent };
  return { kind: 'text', text: line };
}

function formatLogRecord(record: Record<string, unknown>): string {
  const level = levelNames[record.level as number] ?? `LEVEL ${String(record.level)}`;
  const rest = Object.fromEntries(Object.entries(record).filter(([key]) => !pinoBookkeeping.has(key)));
  const details = Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : '';
  return `${level} ${typeof record.msg === 'string' ? record.msg : ''}${details}`;
}

export function cutLine(line: string, maxChars: number): string {
  return line.length > maxChars ? `${line.slice(0, maxChars)}...` : line;
}

/**
 * Calls `onLine` with each line of `stream` (without its line ending). A line longer than
 * `maxLineChars` is handed over in pieces of that length: a child that never writes a newline
 * cannot fill our memory.
 */
export function readLines(stream: Readable, maxLineChars: number, onLine: (line: string) => void): void {
  // Decodes UTF-8 across chunk boundaries.
  stream.setEncoding('utf8');
  let partial = '';
  stream.on('data', (chunk: string) => {
    partial += chunk;
    let start = 0;
    for (let newline = partial.indexOf('\n'); newline !== -1; newline = partial.indexOf('\n', start)) {
      onLine(withoutCarriageReturn(partial.slice(start, newline)));
      start = newline + 1;
    }
    partial = partial.slice(start);
    while (partial.length > maxLineChars) {
      onLine(partial.slice(0, maxLineChars));
      partial = partial.slice(maxLineChars);
    }
  });
  stream.on('end', () => {
    if (partial !== '') onLine(withoutCarriageReturn(partial));
    partial = '';
  });
}

const withoutCarriageReturn = (line: string) => (line.endsWith('\r') ? line.slice(0, -1) : line);

/** The last `maxLines` lines, each cut at `maxLineChars`: what an error message shows of a child. */
export class LastLines {
  private readonly lines: string[] = [];

  constructor(
    private readonly maxLines: number,
    private readonly maxLineChars: number,
  ) {}

  push(line: string): void {
    this.lines.push(cutLine(line, this.maxLineChars));
    if (this.lines.length > this.maxLines) this.lines.shift();
  }

  toArray(): string[] {
    return [...this.lines];
  }
}

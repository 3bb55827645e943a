/**
 * Preloaded into a process under measurement (node --expose-gc --require gc-on-signal.js): a
 * full garbage collection each time the process gets SIGUSR2, so that a benchmark reading its
 * heap afterwards sees what is retained, not garbage that V8 has not collected yet. Changes
 * nothing else in the process.
 */
import { gcSignal } from './gc-totals';

const collect = (globalThis as { gc?: () => void }).gc;
if (collect) process.on(gcSignal, () => collect());
else process.stderr.write('gc-on-signal: start node with --expose-gc, or SIGUSR2 stops the process\n');

/**
 * Preloaded (node --require) into every process a NodeProcess starts (node-process.ts: the
 * tests', benchmarks', fault suite's and demo's children), so that none outlives whoever
 * started it: when that one goes away, even by SIGKILL, the IPC channel to it closes and the
 * child stops itself the graceful way, with SIGTERM. The channel is unref()ed so
 * it never keeps a child alive on its own.
 */
const channel = process.channel;
if (channel) {
  channel.unref();
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
}

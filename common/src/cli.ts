/**
 * Resolves with the name of the first SIGTERM or SIGINT, including one that arrives while the
 * process is still starting, so the caller can stop gracefully once it is up. Later signals
 * are absorbed: a second Ctrl-C must not cut a drain short.
 */
export function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => resolve(signal));
  });
}

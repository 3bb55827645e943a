/**
 * Handlers of a bad deploy, for the fault suite: every integration fails at once, as handlers
 * whose secret is missing do (they throw before any call goes out). A worker running these
 * frees its slots faster than any other, so least-loaded routing favours it: the case that
 * ejection by failure rate exists for (faults/test/failing-worker.test.ts).
 */
import type { HandlerMap } from '@headroom/worker';

/** The secret these handlers pretend to need. */
export const missingSecretName = 'BANK_API_KEY';

export const handlers: HandlerMap = {
  '*': async () => {
    // A plain Error, not a TaskFailedError: a bug of the deploy, not an answer of the upstream.
    throw new Error(`${missingSecretName} is not set`);
  },
};

import { UnleashFailedError } from '../errors';

/** One write to Unleash and the write that takes it back. */
export interface ChangeStep {
  /** e.g. "integration bank-a: 10% -> 30%" */
  describe: string;
  apply(): Promise<void>;
  undo(): Promise<void>;
}

/**
 * Unleash has no transaction across strategies, so a change of several strategies is applied
 * one by one and, when one fails, the ones already applied are taken back (newest first).
 * The error says what was applied and what could be undone, so an operator knows the state.
 */
export async function applySteps(steps: readonly ChangeStep[]): Promise<void> {
  const applied: ChangeStep[] = [];
  for (const step of steps) {
    try {
      await step.apply();
      applied.push(step);
    } catch (error) {
      const undone: string[] = [];
      const notUndone: string[] = [];
      for (const done of applied.reverse()) {
        try {
          await done.undo();
          undone.push(done.describe);
        } catch {
          notUndone.push(done.describe);
        }
      }
      const cause = error instanceof Error ? error.message : String(error);
      const message =
        notUndone.length === 0
          ? `${cause}. Nothing was changed${undone.length > 0 ? ` (${undone.length} earlier step(s) were taken back)` : ''}.`
          : `${cause}. These steps were applied and could NOT be taken back: ${notUndone.join('; ')}.`;
      throw new UnleashFailedError(
        message,
        { applied: notUndone, undone, ...(error instanceof UnleashFailedError && error.details.status !== undefined ? { status: error.details.status } : {}) },
        error,
      );
    }
  }
}

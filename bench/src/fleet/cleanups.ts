/** What a benchmark must stop or delete, undone newest first; one that fails is reported and the others still run. */
export class Cleanups {
  private readonly steps: (() => Promise<void>)[] = [];

  /** Takes a clean-up as soon as there is something to clean up (a bound function: pass it on as is). */
  readonly register = (cleanup: () => Promise<void>): void => {
    this.steps.push(cleanup);
  };

  async runAll(): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) {
      await step().catch((error: unknown) => process.stderr.write(`bench: clean-up failed: ${error instanceof Error ? error.message : String(error)}\n`));
    }
  }
}

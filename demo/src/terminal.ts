/** What the demo launcher prints (it is a CLI: stdout for progress and status, stderr for problems). */

/** A failure to start that the user can fix; printed without a stack. */
export class StartError extends Error {
  override name = 'StartError';
}

export const say = (line: string) => process.stdout.write(`${line}\n`);
export const write = (text: string) => process.stdout.write(text);
export const warn = (line: string) => process.stderr.write(`${line}\n`);

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

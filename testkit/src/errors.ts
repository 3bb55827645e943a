/** The testkit's coded errors (see @headroom/common's HeadroomError). */
import { HeadroomError } from '@headroom/common';
import type { ProcessExit } from './process-output';

/**
 * A started process did not report what it was waited for (its ready line, or another event):
 * it exited first (`exit` says how), or the time ran out (`exit` undefined), or its ready line
 * named no address. The message names the process and shows its last output lines.
 */
export class ProcessNotReadyError extends HeadroomError {
  constructor(
    message: string,
    readonly processName: string,
    readonly exit: ProcessExit | undefined,
    readonly lastLines: readonly string[],
  ) {
    super('HR_ERR_PROCESS_NOT_READY', message);
    this.name = 'ProcessNotReadyError';
  }
}

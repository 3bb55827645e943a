import { ClientOverloadedError, HeadroomClientError, InternalError } from './errors';
import type { ClientStats } from './submit-types';

/** Distinct failure codes counted by name; the rest count under "other" (the map stays bounded). */
const maxCountedCodes = 100;

/** What both clients (through balancers, and proxyless) count around each submit, and their limit on submits under way. */
export class SubmitTally {
  private readonly stats: ClientStats = { inFlight: 0, submitted: 0, succeeded: 0, retries: 0, failedByCode: {} };

  constructor(private readonly maxInFlight: number) {}

  countFailure(code: string): void {
    const { failedByCode } = this.stats;
    const counted = code in failedByCode || Object.keys(failedByCode).length < maxCountedCodes ? code : 'other';
    failedByCode[counted] = (failedByCode[counted] ?? 0) + 1;
  }

  countRetry(): void {
    this.stats.retries++;
  }

  /** Runs one submit within maxInFlight (ClientOverloadedError beyond it), counting how it ended. */
  async run<T>(submit: () => Promise<T>): Promise<T> {
    const { stats } = this;
    if (stats.inFlight >= this.maxInFlight) {
      this.countFailure(ClientOverloadedError.code);
      throw new ClientOverloadedError(`${stats.inFlight} submits are under way, the limit is ${this.maxInFlight} (maxInFlight)`);
    }
    stats.inFlight++;
    stats.submitted++;
    try {
      const result = await submit();
      stats.succeeded++;
      return result;
    } catch (error) {
      this.countFailure(error instanceof HeadroomClientError ? error.code : InternalError.code);
      throw error;
    } finally {
      stats.inFlight--;
    }
  }

  snapshot(): ClientStats {
    return { ...this.stats, failedByCode: { ...this.stats.failedByCode } };
  }
}

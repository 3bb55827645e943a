import { Session } from 'node:inspector/promises';
import * as grpc from '@grpc/grpc-js';
import { HeadroomError, silentLogger, sleep, type Logger } from '@headroom/common';
import { UnreadableRequest, metadataKeys, profileLimits, type ProfileRequest__Output, type ProfileResponse } from '@headroom/proto';
import { workerErrorCodes } from './errors';

/** V8's sampling interval, DevTools' default: a 60 s profile of a busy worker stays within a few MiB. */
const samplingIntervalUs = 1000;

/**
 * The V8 profiler samples the whole isolate, whichever worker asked: one profile at a time per
 * thread (module state is per thread), not per worker object.
 */
const thisThread = { profilingUntilUnixMs: 0 };

/**
 * Worker.Profile: CPU profiles of the worker's own process through the in-process inspector
 * (no --inspect flag, no restart).
 */
export class WorkerProfiler {
  private running: AbortController | undefined;
  private stopped = false;

  constructor(
    private readonly workerId: string,
    private readonly logger: Logger = silentLogger,
  ) {}

  /**
   * The gRPC handler. Refusals carry metadata "headroom-error-code", as Execute's do. The request
   * is an UnreadableRequest when its bytes did not decode (the worker registers it with
   * withTolerantDeserializers): the caller's mistake, not the worker's.
   */
  readonly handle: grpc.handleUnaryCall<ProfileRequest__Output | UnreadableRequest, ProfileResponse> = (call, callback) => {
    if (call.request instanceof UnreadableRequest) {
      return callback(
        refusal(
          grpc.status.INVALID_ARGUMENT,
          workerErrorCodes.invalidRequest,
          `the message is not a valid ${call.request.messageType}: ${call.request.reason}`,
        ),
      );
    }
    const { durationMs, workerId } = call.request;
    if (this.stopped) return callback(refusal(grpc.status.UNAVAILABLE, workerErrorCodes.workerStopped, `worker ${this.workerId} is stopping`));
    if (workerId !== this.workerId) {
      return callback(
        refusal(
          grpc.status.INVALID_ARGUMENT,
          workerErrorCodes.invalidRequest,
          `workerId is ${JSON.stringify(workerId)}, this worker is ${JSON.stringify(this.workerId)}`,
        ),
      );
    }
    if (!Number.isInteger(durationMs) || durationMs < profileLimits.minDurationMs || durationMs > profileLimits.maxDurationMs) {
      return callback(
        refusal(
          grpc.status.INVALID_ARGUMENT,
          workerErrorCodes.invalidRequest,
          `durationMs is ${durationMs}; expected ${profileLimits.minDurationMs} to ${profileLimits.maxDurationMs}`,
        ),
      );
    }
    if (thisThread.profilingUntilUnixMs !== 0) {
      const msLeft = thisThread.profilingUntilUnixMs - Date.now();
      const error = refusal(
        grpc.status.RESOURCE_EXHAUSTED,
        workerErrorCodes.profileRunning,
        `a CPU profile of this process is already running (${Math.max(0, msLeft)} ms left)`,
      );
      error.metadata.set(metadataKeys.retryAfterMs, String(Math.max(0, msLeft)));
      return callback(error);
    }
    thisThread.profilingUntilUnixMs = Date.now() + durationMs;
    const abort = new AbortController();
    this.running = abort;
    const onCancelled = () => abort.abort(new HeadroomError(workerErrorCodes.cancelled, 'the caller cancelled the profile'));
    call.on('cancelled', onCancelled);
    this.logger.info({ durationMs }, 'CPU profile started');
    this.record(durationMs, abort.signal)
      .then(
        (cpuprofile) => {
          this.logger.info({ durationMs, bytes: cpuprofile.length }, 'CPU profile done');
          callback(null, { cpuprofile });
        },
        (error: unknown) => {
          this.logger.warn({ err: error }, 'CPU profile failed');
          callback(toStatus(error));
        },
      )
      .finally(() => {
        call.off('cancelled', onCancelled);
        if (this.running === abort) this.running = undefined;
        thisThread.profilingUntilUnixMs = 0;
      });
  };

  /** Ends a running profile at once and refuses new ones (the worker is stopping); callers get UNAVAILABLE. */
  stop(): void {
    this.stopped = true;
    this.running?.abort(new HeadroomError(workerErrorCodes.workerStopped, 'the worker is stopping'));
  }

  private async record(durationMs: number, signal: AbortSignal): Promise<Buffer> {
    const session = new Session();
    session.connect();
    try {
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: samplingIntervalUs });
      await session.post('Profiler.start');
      if (!process.env.NODE_V8_COVERAGE) await deoptimiseAll(session);
      await sleep(durationMs, signal);
      const { profile } = await session.post('Profiler.stop');
      const cpuprofile = Buffer.from(JSON.stringify(profile));
      if (cpuprofile.length > profileLimits.maxCpuprofileBytes) {
        throw new HeadroomError(
          workerErrorCodes.profileTooLarge,
          `the profile is ${cpuprofile.length} bytes, more than the ${profileLimits.maxCpuprofileBytes} a worker answers with; profile for less time`,
        );
      }
      return cpuprofile;
    } finally {
      // Also stops the profiler when the profile was abandoned.
      session.disconnect();
    }
  }
}

/**
 * Code V8 optimised before the profiler started carries no record of what it inlined: time in an
 * inlined function (a small handler inlined into the task runner) would be charged to its caller.
 * Switching to precise coverage and back makes V8 discard all optimised code; what it optimises
 * again while the profiler runs is attributed right. The cost is a moment of slower code.
 * Skipped while the process collects coverage itself (NODE_V8_COVERAGE): the mode is per isolate.
 */
async function deoptimiseAll(session: Session): Promise<void> {
  await session.post('Profiler.startPreciseCoverage', { callCount: false, detailed: false });
  await session.post('Profiler.stopPreciseCoverage');
}

function refusal(status: grpc.status, code: string, message: string): grpc.ServiceError {
  const metadata = new grpc.Metadata();
  metadata.set(metadataKeys.errorCode, code);
  return Object.assign(new Error(message), { code: status, details: message, metadata });
}

const statusByCode: Record<string, grpc.status> = {
  [workerErrorCodes.cancelled]: grpc.status.CANCELLED,
  [workerErrorCodes.workerStopped]: grpc.status.UNAVAILABLE,
  [workerErrorCodes.profileTooLarge]: grpc.status.RESOURCE_EXHAUSTED,
};

function toStatus(error: unknown): grpc.ServiceError {
  if (error instanceof HeadroomError && statusByCode[error.code] !== undefined) return refusal(statusByCode[error.code]!, error.code, error.message);
  return refusal(
    grpc.status.INTERNAL,
    workerErrorCodes.profileFailed,
    `the inspector could not take the profile: ${error instanceof Error ? error.message : String(error)}`,
  );
}

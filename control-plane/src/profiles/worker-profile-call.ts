import * as grpc from '@grpc/grpc-js';
import { HeadroomError } from '@headroom/common';
import { WorkerService, metadataKeys, profileLimits, type ChannelSecurity, type WorkerClient } from '@headroom/proto';
import { apiErrorCodes } from '../errors';

export interface ProfileTarget {
  workerId: string;
  /** host:port of its gRPC server, from the ledger. */
  address: string;
}

/**
 * Calls Worker.Profile and resolves with the profile's JSON. A channel of its own, closed after:
 * profiles are rare, and their answers are larger than task answers. Fails with the worker's
 * code (HR_ERR_PROFILE_RUNNING, ...) or HR_ERR_PROFILE_FAILED.
 */
export function requestProfile(target: ProfileTarget, security: ChannelSecurity, durationMs: number, deadlineMs: number, signal: AbortSignal): Promise<Buffer> {
  const client = new WorkerService(target.address, security.credentials, {
    ...security.options,
    'grpc.max_receive_message_length': profileLimits.maxCpuprofileBytes + 64 * 1024,
  }) as WorkerClient;
  return new Promise<Buffer>((resolve, reject) => {
    const call = client.profile({ workerId: target.workerId, durationMs }, { deadline: Date.now() + deadlineMs }, (error, response) => {
      signal.removeEventListener('abort', cancel);
      if (!error) return resolve(response!.cpuprofile);
      const code = String(error.metadata?.get(metadataKeys.errorCode)[0] ?? '') || apiErrorCodes.profileFailed;
      reject(new HeadroomError(code, `worker ${target.workerId} at ${target.address}: ${grpc.status[error.code]}: ${error.details}`, { cause: error }));
    });
    const cancel = () => call.cancel();
    if (signal.aborted) cancel();
    else signal.addEventListener('abort', cancel, { once: true });
  }).finally(() => client.close());
}

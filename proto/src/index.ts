import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ProtoGrpcType } from './generated/headroom';

export type { Task, Task__Output } from './generated/headroom/v1/Task';
export type { Priority__Output as Priority } from './generated/headroom/v1/Priority';
export type { TaskError, TaskError__Output } from './generated/headroom/v1/TaskError';
export type { Placement } from './generated/headroom/v1/Placement';
export type { SubmitRequest, SubmitRequest__Output } from './generated/headroom/v1/SubmitRequest';
export type { SubmitResponse, SubmitResponse__Output } from './generated/headroom/v1/SubmitResponse';
export type { ExecuteRequest, ExecuteRequest__Output } from './generated/headroom/v1/ExecuteRequest';
export type { ExecuteResponse, ExecuteResponse__Output } from './generated/headroom/v1/ExecuteResponse';
export type { ProfileRequest, ProfileRequest__Output } from './generated/headroom/v1/ProfileRequest';
export type { ProfileResponse, ProfileResponse__Output } from './generated/headroom/v1/ProfileResponse';
export type { BalancerClient, BalancerHandlers } from './generated/headroom/v1/Balancer';
export type { WorkerClient, WorkerHandlers } from './generated/headroom/v1/Worker';

/** Absolute path of the .proto file, for tools (grpcurl, other languages). */
export const protoFile = path.join(__dirname, '..', '..', 'headroom', 'v1', 'headroom.proto');

// Options must match those given to proto-loader-gen-types in scripts/generate.sh,
// so that the generated types describe what the loader really returns.
const packageDefinition = protoLoader.loadSync(protoFile, {
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});

const loaded = grpc.loadPackageDefinition(packageDefinition) as unknown as ProtoGrpcType;

/** Client constructor and service definition of headroom.v1.Balancer. */
export const BalancerService = loaded.headroom.v1.Balancer;
/** Client constructor and service definition of headroom.v1.Worker. */
export const WorkerService = loaded.headroom.v1.Worker;

/** Metadata keys of the contract (see the comments in headroom.proto). */
export const metadataKeys = {
  errorCode: 'headroom-error-code',
  retryAfterMs: 'retry-after-ms',
  started: 'headroom-started',
} as const;

/** Bounds of Worker.Profile, shared by the worker (which enforces them) and its callers. */
export const profileLimits = {
  minDurationMs: 100,
  maxDurationMs: 60_000,
  /** Largest profile a worker answers with; callers must accept messages this large. */
  maxCpuprofileBytes: 16 * 1024 * 1024,
} as const;

export { addHealthService, checkHealth, healthService, type HealthStatus } from './health';
export {
  serverTlsSchema,
  clientTlsSchema,
  serverCredentials,
  channelSecurity,
  http2ClientTls,
  http2ServerTls,
  type Http2ClientTls,
  type Http2ServerTls,
  type ServerTls,
  type ClientTls,
  type ChannelSecurity,
} from './tls';
export * from './tls-options';
export { UnreadableRequest, withTolerantDeserializers, receiveLimitInterceptor, type ReceiveLimitOptions } from './unreadable-requests';

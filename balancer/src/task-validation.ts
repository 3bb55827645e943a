import { UnreadableRequest, type Priority, type SubmitRequest__Output, type Task__Output } from '@headroom/proto';
import { HeadroomError } from '@headroom/common';
import { balancerErrorCodes, invalidTask } from './errors';

export interface TaskLimits {
  maxPayloadBytes: number;
  defaultTaskTimeoutMs: number;
  maxTaskTimeoutMs: number;
}

/** Room for a Submit message's fields besides the payload (id, key, integration: under 1 KiB). */
const messageOverheadBytes = 64 * 1024;

/** The largest Submit message the server reads (grpc.max_receive_message_length): a little over the payload limit. */
export function maxSubmitMessageBytes(limits: Pick<TaskLimits, 'maxPayloadBytes'>): number {
  return limits.maxPayloadBytes + messageOverheadBytes;
}

/** The answer to a Submit message over maxSubmitMessageBytes (grpc-js drops it unread). */
export function messageTooLarge(limits: Pick<TaskLimits, 'maxPayloadBytes'>): HeadroomError {
  return invalidTask(
    'task',
    `the message is larger than the limit of ${maxSubmitMessageBytes(limits)} bytes (maxPayloadBytes ${limits.maxPayloadBytes} for task.payload, plus ${messageOverheadBytes} for the other fields); it was not read`,
  );
}

/** A task that passed validation: every field present and within its limits. */
export interface ValidTask extends Task__Output {
  priority: Exclude<Priority, 'PRIORITY_UNSPECIFIED'>;
}

const integrationPattern = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const priorities = new Set<string>(['USER_PRESENT', 'BACKGROUND']);

/**
 * Validates a Submit request; throws HR_ERR_INVALID_TASK naming the field, the value and
 * what is accepted. Hand-written rather than a schema library: it runs once per task on
 * the hot path, and the checks are few and flat.
 */
export function validateSubmit(request: SubmitRequest__Output | UnreadableRequest, limits: TaskLimits, nowMs = Date.now()): ValidTask {
  if (request instanceof UnreadableRequest) {
    throw invalidTask('request', `the message is not a valid ${request.messageType} (a headroom.v1.Task in field 1, task): ${request.reason}`);
  }
  const task = request.task;
  if (!task) throw invalidTask('task', 'missing');
  return validateTask(task, limits, nowMs);
}

/**
 * The same checks on a task given without a Submit message (the proxyless client): the same
 * rules, the same HR_ERR_INVALID_TASK naming the field.
 */
export function validateTask(task: Task__Output, limits: TaskLimits, nowMs = Date.now()): ValidTask {
  checkText('task.id', task.id, 128);
  checkText('task.key', task.key, 256);
  if (!integrationPattern.test(task.integration)) {
    throw invalidTask(
      'task.integration',
      `got ${JSON.stringify(task.integration.slice(0, 80))}, expected 1-64 characters of a-z, 0-9, ".", "_", "-" such as "bank-a"`,
    );
  }
  if (!priorities.has(task.priority as string)) {
    throw invalidTask('task.priority', `got ${JSON.stringify(task.priority)}, expected USER_PRESENT or BACKGROUND`);
  }
  if (task.payload.length > limits.maxPayloadBytes) {
    throw invalidTask('task.payload', `${task.payload.length} bytes, the limit is ${limits.maxPayloadBytes} bytes`);
  }
  let deadlineUnixMs = task.deadlineUnixMs;
  if (!Number.isSafeInteger(deadlineUnixMs) || deadlineUnixMs < 0) {
    throw invalidTask('task.deadlineUnixMs', `got ${deadlineUnixMs}, expected Unix milliseconds, or 0 for the default timeout`);
  }
  if (deadlineUnixMs === 0) deadlineUnixMs = nowMs + limits.defaultTaskTimeoutMs;
  else if (deadlineUnixMs <= nowMs) {
    // A well-formed deadline that passed on the way (a client's retry sent just before it, or
    // clocks apart) has expired, as gRPC would say of its own deadline: not a malformed task.
    throw new HeadroomError(
      balancerErrorCodes.deadlineExceeded,
      `task.deadlineUnixMs: the deadline passed ${nowMs - deadlineUnixMs} ms before the task arrived (${deadlineUnixMs})`,
    );
  } else if (deadlineUnixMs > nowMs + limits.maxTaskTimeoutMs) {
    throw invalidTask('task.deadlineUnixMs', `${deadlineUnixMs} is more than ${limits.maxTaskTimeoutMs} ms (maxTaskTimeoutMs) ahead`);
  }
  return { ...task, deadlineUnixMs, priority: task.priority as ValidTask['priority'] };
}

function checkText(field: string, value: string, maxBytes: number): void {
  if (value.length === 0) throw invalidTask(field, 'missing (empty)');
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > maxBytes) throw invalidTask(field, `${bytes} bytes, the limit is ${maxBytes}`);
  // protobuf decodes invalid UTF-8 to U+FFFD; refuse it rather than route on a mangled key.
  if (value.includes('\uFFFD')) throw invalidTask(field, 'is not valid UTF-8');
}

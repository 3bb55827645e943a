/**
 * The time slots in which workers' latency summaries (latency.ts) and balancers' errors
 * (balancer-errors.ts) are counted in Redis: both use the same slots, so that a reader adds one
 * slot of each together.
 */
export const latencyDefaults = {
  /** @default 10000 */
  slotMs: 10_000,
  /** Slots kept; the longest window that can be read. @default 3600000 (1 h) */
  retentionMs: 3_600_000,
};

/** The start (Unix ms) of the slot that holds `atUnixMs`. */
export function slotStartOf(atUnixMs: number, slotMs: number): number {
  return atUnixMs - (atUnixMs % slotMs);
}

/**
 * The start of each slot that overlaps the last `windowMs` before `nowUnixMs`, oldest first (the
 * newest is still filling). A window is at most the retention, so these are at most
 * retentionMs / slotMs + 1.
 */
export function slotStartsWithin(windowMs: number, nowUnixMs: number, slotMs: number): number[] {
  const starts: number[] = [];
  for (let slot = slotStartOf(nowUnixMs - windowMs, slotMs); slot <= nowUnixMs; slot += slotMs) starts.push(slot);
  return starts;
}

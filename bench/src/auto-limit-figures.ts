/**
 * The auto-limit benchmark's figures, from the limit's history as the control plane keeps it (one
 * decision a tick, GET /limits/{cluster}/{integration}/history), against the incident's start and end.
 *
 * Settled: the first decision after the incident's start from which the limit stays, until the
 * incident's end, within ±`settleBand` of the value it holds at the end (its trouble value), that
 * value being below its normal one. The rule moves by halves and doubles, far more than 10%, so
 * the band forgives only the rounding of the footprint; a limit that falls, bounces back up and
 * falls again settles at its last fall, not its first. "At or below the trouble value" would
 * call a limit settled while it still fell step by step.
 * Back: the first decision after the incident's end from which the limit stays at its normal
 * value (the setting's maximum) until the observation ends; a return followed by another fall
 * counts from the later return.
 */

/** One decision as GET /limits/{cluster}/{integration}/history gives it (the fields this reads). */
export interface LimitPoint {
  atUnixMs: number;
  limitInFlight: number;
  inFlight: number;
  runTimeP50Ms: number | null;
  baselineMs: number | null;
  reason: string;
}

export interface LimitTimes {
  /** Decisions from here count (the repetition's first: its lead-in's start). */
  observedFromUnixMs: number;
  incidentStartUnixMs: number;
  incidentEndUnixMs: number;
  /** Decisions up to here count (the repetition's last). */
  observedUntilUnixMs: number;
  /** The limit's normal value: the auto setting's maximum. */
  normalInFlight: number;
  /** ± this share of the trouble value counts as settled (0.1: ±10%). */
  settleBand: number;
}

export interface LimitFigures {
  /** The limit when the incident started (the last decision before it); null when none was made yet. */
  atStartInFlight: number | null;
  /** At the incident's end (the last decision before it): the trouble value. */
  atEndInFlight: number | null;
  /** The lowest during the incident. */
  lowestInFlight: number | null;
  /** From the incident's start to the decision that settled it; null when it never left its normal value or never settled. */
  settledAfterMs: number | null;
  /** From the incident's end to the decision from which it stays at its normal value; null when not back by the end of the observation, or when it never fell. */
  backAfterMs: number | null;
  /** From the incident's end to its first decision at the normal value (later falls not counted); null when none. */
  firstBackAfterMs: number | null;
  /** Changes of limit from the incident's start to the observation's end: 2 is one fall and one return. */
  changes: number;
  /** Changes of limit in the lead-in (false alarms: should be 0). */
  leadInChanges: number;
  /** Decisions read from the incident's start to the observation's end. */
  decisions: number;
  /** Each reason's count over the same span. */
  reasons: Record<string, number>;
}

const changesIn = (points: readonly LimitPoint[], before: number | null) => {
  let changes = 0;
  let previous = before;
  for (const point of points) {
    if (previous !== null && point.limitInFlight !== previous) changes++;
    previous = point.limitInFlight;
  }
  return changes;
};

/** The first point of `points` from which `holds` is true to the last point; null when the last one fails it. */
function firstOfLastRun(points: readonly LimitPoint[], holds: (point: LimitPoint) => boolean): LimitPoint | null {
  let first: LimitPoint | null = null;
  for (const point of points) {
    if (!holds(point)) first = null;
    else first ??= point;
  }
  return first;
}

export function limitFigures(history: readonly LimitPoint[], times: LimitTimes): LimitFigures {
  const points = [...history]
    .sort((a, b) => a.atUnixMs - b.atUnixMs)
    .filter((p) => p.atUnixMs >= times.observedFromUnixMs && p.atUnixMs <= times.observedUntilUnixMs);
  const leadIn = points.filter((p) => p.atUnixMs < times.incidentStartUnixMs);
  const during = points.filter((p) => p.atUnixMs >= times.incidentStartUnixMs && p.atUnixMs < times.incidentEndUnixMs);
  const after = points.filter((p) => p.atUnixMs >= times.incidentEndUnixMs);
  const atStart = leadIn.at(-1)?.limitInFlight ?? null;
  const atEnd = during.at(-1)?.limitInFlight ?? atStart;

  let settledAfterMs: number | null = null;
  if (atEnd !== null && atEnd < times.normalInFlight) {
    const band = times.settleBand * atEnd;
    const settled = firstOfLastRun(during, (p) => Math.abs(p.limitInFlight - atEnd) <= band);
    if (settled) settledAfterMs = settled.atUnixMs - times.incidentStartUnixMs;
  }
  const atNormal = (p: LimitPoint) => p.limitInFlight >= times.normalInFlight;
  const sinceStart = [...during, ...after];
  // A limit that never left its normal value did not come back: it never went.
  const fell = sinceStart.some((p) => !atNormal(p));
  const back = fell ? firstOfLastRun(after, atNormal) : null;
  const firstBack = fell ? after.find(atNormal) : undefined;
  const reasons: Record<string, number> = {};
  for (const point of sinceStart) reasons[point.reason] = (reasons[point.reason] ?? 0) + 1;
  return {
    atStartInFlight: atStart,
    atEndInFlight: atEnd,
    lowestInFlight: during.length > 0 ? Math.min(...during.map((p) => p.limitInFlight)) : null,
    settledAfterMs,
    backAfterMs: back ? back.atUnixMs - times.incidentEndUnixMs : null,
    firstBackAfterMs: firstBack ? firstBack.atUnixMs - times.incidentEndUnixMs : null,
    changes: changesIn(sinceStart, atStart),
    leadInChanges: changesIn(leadIn, null),
    decisions: sinceStart.length,
    reasons,
  };
}

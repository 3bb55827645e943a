import { z } from 'zod';

/**
 * The .cpuprofile format: what V8's Profiler.stop returns and Chrome DevTools writes (and what
 * speedscope reads). Times are in microseconds; line and column numbers are 0-based.
 */
const cpuprofileSchema = z.object({
  nodes: z
    .array(
      z.object({
        id: z.number().int(),
        callFrame: z.object({
          functionName: z.string(),
          url: z.string(),
          lineNumber: z.number().int(),
          columnNumber: z.number().int(),
          scriptId: z.union([z.string(), z.number()]),
        }),
        hitCount: z.number().int().nonnegative().optional(),
        children: z.array(z.number().int()).optional(),
      }),
    )
    .min(1),
  startTime: z.number(),
  endTime: z.number(),
  samples: z.array(z.number().int()).optional(),
  timeDeltas: z.array(z.number()).optional(),
});

export type Cpuprofile = z.output<typeof cpuprofileSchema>;

/** Parses a .cpuprofile's JSON, or says why it is not one. */
export function parseCpuprofile(json: Buffer): { profile: Cpuprofile } | { problem: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(json.toString('utf8'));
  } catch (error) {
    return { problem: `not JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  const parsed = cpuprofileSchema.safeParse(raw);
  if (parsed.success) return { profile: parsed.data };
  const issue = parsed.error.issues[0]!;
  return { problem: `not a .cpuprofile: ${issue.path.join('.') || '(root)'}: ${issue.message}` };
}

export interface FunctionSelfTime {
  /** "(anonymous)" for a function without a name; V8's own entries look like "(garbage collector)". */
  functionName: string;
  url: string;
  /** 1-based, as editors show it; 0 when V8 gives none (native code, "(program)"). */
  lineNumber: number;
  /** "url:line", or "" without a url. */
  location: string;
  /** Time the function itself was on the CPU (callees excluded). */
  selfMs: number;
  /** selfMs as a share of the CPU time: the sampled time less "(idle)", as the UI's flame graph counts it (0..1). */
  share: number;
}

export interface ProfileSummary {
  /** endTime - startTime. */
  profiledMs: number;
  samples: number;
  /** Time the process waited for work ("(idle)"); the rest was on the CPU. */
  idleMs: number;
  /** Functions by self time, most first. */
  topFunctions: FunctionSelfTime[];
}

/** Entries that are not code: the tree's root, and time with nothing to do. */
const rootName = '(root)';
const idleName = '(idle)';

/**
 * Self time per function (name + url + line), from the samples: each sample is charged the time
 * until the next one (the last, until endTime), as DevTools does. Profiles without samples fall
 * back to hitCount x the mean interval.
 */
export function summarise(profile: Cpuprofile, topFunctions: number): ProfileSummary {
  const selfUsByNode = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  if (samples.length > 0 && deltas.length === samples.length) {
    let at = profile.startTime;
    for (let i = 0; i < samples.length; i++) {
      at += deltas[i]!;
      const until = i + 1 < samples.length ? at + deltas[i + 1]! : profile.endTime;
      selfUsByNode.set(samples[i]!, (selfUsByNode.get(samples[i]!) ?? 0) + Math.max(0, until - at));
    }
  } else {
    const hits = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
    const usPerHit = hits > 0 ? (profile.endTime - profile.startTime) / hits : 0;
    for (const node of profile.nodes) selfUsByNode.set(node.id, (node.hitCount ?? 0) * usPerHit);
  }

  const byFunction = new Map<string, { functionName: string; url: string; lineNumber: number; selfUs: number }>();
  let totalUs = 0;
  let idleUs = 0;
  for (const node of profile.nodes) {
    const selfUs = selfUsByNode.get(node.id) ?? 0;
    totalUs += selfUs;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === idleName) idleUs += selfUs;
    if (selfUs === 0 || functionName === idleName || functionName === rootName) continue;
    const key = `${functionName}\n${url}\n${lineNumber}`;
    const entry = byFunction.get(key) ?? { functionName: functionName || '(anonymous)', url, lineNumber: lineNumber + 1, selfUs: 0 };
    entry.selfUs += selfUs;
    byFunction.set(key, entry);
  }
  const top = [...byFunction.values()].sort((a, b) => b.selfUs - a.selfUs).slice(0, topFunctions);
  // Shares of CPU time, as the flame graph shows them: idle time in the sum made a busy function look small.
  const cpuUs = totalUs - idleUs;
  return {
    profiledMs: round((profile.endTime - profile.startTime) / 1000, 1),
    samples: samples.length,
    idleMs: round(idleUs / 1000, 1),
    topFunctions: top.map(({ functionName, url, lineNumber, selfUs }) => ({
      functionName,
      url,
      lineNumber: Math.max(0, lineNumber),
      location: url ? `${url}:${lineNumber}` : '',
      selfMs: round(selfUs / 1000, 1),
      share: cpuUs > 0 ? round(selfUs / cpuUs, 4) : 0,
    })),
  };
}

function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

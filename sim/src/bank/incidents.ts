/**
 * Incidents that can be switched on per bank, at most one of each kind per bank (so the
 * board never holds more than banks x kinds entries):
 *   latency-spike  every answer takes `factor` times as long (default 10); ends by itself
 *                  after `durationMs` (default 15000): a short, sharp spike
 *   slow           every answer takes `factor` times as long (default 3) until cleared
 *                  (or `durationMs`, when given)
 *   outage         every request is answered at once with 503 until cleared (or `durationMs`)
 * A spike and a slow bank at once multiply. Setting a kind again on the same bank replaces it.
 *
 * An incident may name a `cluster`: then only calls that say they come from that cluster (the
 * bank handlers send their worker's cluster in the `x-headroom-cluster` header) feel it, so a
 * test can slow one bank for the candidate cluster alone; calls without the header, or from
 * another cluster, are answered as usual. Still one incident of each kind per bank.
 */
import { z } from 'zod';
import { parseConfig } from '@headroom/common';

export const incidentKinds = ['latency-spike', 'slow', 'outage'] as const;
export type IncidentKind = (typeof incidentKinds)[number];

/** Factor and duration of each kind when the request gives none (undefined: until cleared). */
export const incidentDefaults: Readonly<Record<IncidentKind, { factor: number | undefined; durationMs: number | undefined }>> = {
  'latency-spike': { factor: 10, durationMs: 15_000 },
  slow: { factor: 3, durationMs: undefined },
  outage: { factor: undefined, durationMs: undefined },
};

const maxIncidentDurationMs = 86_400_000;
const maxLatencyFactor = 1000;

const kindRule = `expected one of ${incidentKinds.join(', ')}`;

/** The request header a call names its cluster in (sent by sim/src/handlers/bank.ts). */
export const clusterHeader = 'x-headroom-cluster';
/** Cluster names as workers accept them (@headroom/common's settings.name). */
const clusterNamePattern = /^[A-Za-z0-9._-]{1,64}$/;
const clusterRule = 'expected a cluster name of 1-64 characters of A-Z, a-z, 0-9, ".", "_", "-"';

function incidentSchema(bankNames: readonly string[]) {
  return z
    .object({
      bank: z
        .string({ error: `expected one of ${bankNames.join(', ')}` })
        .refine((bank) => bankNames.includes(bank), `expected one of ${bankNames.join(', ')}`),
      kind: z.enum(incidentKinds, { error: kindRule }),
      factor: z
        .number({ error: `expected a number from 1 to ${maxLatencyFactor}` })
        .min(1, `expected a number from 1 to ${maxLatencyFactor}`)
        .max(maxLatencyFactor, `expected a number from 1 to ${maxLatencyFactor}`)
        .optional(),
      durationMs: z
        .number({ error: `expected whole milliseconds from 1 to ${maxIncidentDurationMs}` })
        .int(`expected whole milliseconds from 1 to ${maxIncidentDurationMs}`)
        .min(1, `expected whole milliseconds from 1 to ${maxIncidentDurationMs}`)
        .max(maxIncidentDurationMs, `expected whole milliseconds from 1 to ${maxIncidentDurationMs}`)
        .optional(),
      cluster: z.string({ error: clusterRule }).regex(clusterNamePattern, clusterRule).optional(),
    })
    .strict()
    .superRefine((input, context) => {
      if (input.kind === 'outage' && input.factor !== undefined) context.addIssue({ code: 'custom', path: ['factor'], message: 'an outage takes no factor' });
    });
}

export type IncidentInput = z.input<ReturnType<typeof incidentSchema>>;

export interface Incident {
  bank: string;
  kind: IncidentKind;
  /** Latency multiplier; null for an outage. */
  factor: number | null;
  startedAtUnixMs: number;
  /** null: until cleared. */
  endsAtUnixMs: number | null;
  /** Only calls from this cluster feel it; null: every call. */
  cluster: string | null;
}

export interface IncidentFilter {
  bank?: string;
  kind?: IncidentKind;
}

/** What the incidents in force do to one bank's next answer. */
export interface IncidentEffect {
  latencyFactor: number;
  /** The outage in force, if any. */
  outage: Incident | undefined;
}

export class IncidentBoard {
  private readonly byBankAndKind = new Map<string, Incident>();
  private readonly inputSchema: ReturnType<typeof incidentSchema>;
  private readonly filterSchema: z.ZodType<IncidentFilter>;

  constructor(
    bankNames: readonly string[],
    private readonly nowUnixMs: () => number = Date.now,
  ) {
    this.inputSchema = incidentSchema(bankNames);
    this.filterSchema = z
      .object({
        bank: z
          .string()
          .refine((bank) => bankNames.includes(bank), `expected one of ${bankNames.join(', ')}`)
          .optional(),
        kind: z.enum(incidentKinds, { error: kindRule }).optional(),
      })
      .strict();
  }

  /** Validates `input` (a ConfigError names each bad field) and switches the incident on. */
  set(input: unknown): Incident {
    const { bank, kind, factor, durationMs, cluster } = parseConfig('incident', this.inputSchema, input);
    const defaults = incidentDefaults[kind];
    const startedAtUnixMs = this.nowUnixMs();
    const lastsMs = durationMs ?? defaults.durationMs;
    const incident: Incident = {
      bank,
      kind,
      factor: kind === 'outage' ? null : (factor ?? defaults.factor ?? 1),
      startedAtUnixMs,
      endsAtUnixMs: lastsMs === undefined ? null : startedAtUnixMs + lastsMs,
      cluster: cluster ?? null,
    };
    this.byBankAndKind.set(`${bank}/${kind}`, incident);
    return incident;
  }

  /** Validates `filter` (bank, kind: both optional) and ends the incidents it matches; answers how many. */
  clear(filter: unknown = {}): number {
    const { bank, kind } = parseConfig('incident filter', this.filterSchema, filter);
    let cleared = 0;
    for (const [key, incident] of this.live()) {
      if ((bank === undefined || incident.bank === bank) && (kind === undefined || incident.kind === kind)) {
        this.byBankAndKind.delete(key);
        cleared++;
      }
    }
    return cleared;
  }

  list(): Incident[] {
    return [...this.live()].map(([, incident]) => ({ ...incident }));
  }

  /** What the incidents in force do to a call to `bank` from `cluster` (undefined: a call that names none). */
  effectOn(bank: string, cluster?: string): IncidentEffect {
    let latencyFactor = 1;
    let outage: Incident | undefined;
    for (const [, incident] of this.live()) {
      if (incident.bank !== bank) continue;
      if (incident.cluster !== null && incident.cluster !== cluster) continue;
      if (incident.kind === 'outage') outage = incident;
      else latencyFactor *= incident.factor ?? 1;
    }
    return { latencyFactor, outage };
  }

  /** The incidents still in force; those past their end are dropped on the way. */
  private *live(): Generator<[string, Incident]> {
    const now = this.nowUnixMs();
    for (const [key, incident] of this.byBankAndKind) {
      if (incident.endsAtUnixMs !== null && incident.endsAtUnixMs <= now) this.byBankAndKind.delete(key);
      else yield [key, incident];
    }
  }
}

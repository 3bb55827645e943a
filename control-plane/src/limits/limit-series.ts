/**
 * The Limits page's charts: per cluster and integration and 10-second time slot, its limit in
 * flight, the tasks in flight and waiting at the limit, the tasks balancers refused at the limit,
 * and the run time (p50, the auto limiter's signal, and p99).
 *
 * Kept in Redis, in hashes per time slot beside the latency summaries (same slots, same
 * retention), so that the series survives a control plane's restart and reads the same from
 * every control plane. Every control plane samples: a sample is merged into its slot (the peak
 * of in flight and waiting, the last limit), never added, so two control planes writing the
 * same slot give what one would. Bounded: slots expire after the retention, and each slot holds
 * at most maxIntegrationsPerCluster integrations per cluster (those left out are counted).
 */
import type { Counter, Gauge } from 'prom-client';
import { HeadroomError, type Logger } from '@headroom/common';
import {
  latencyDefaults,
  latencyKeys,
  parseBalancerErrors,
  readLatencySlots,
  slotStartOf,
  slotStartsWithin,
  LedgerUnavailableError,
  type RedisConnection,
} from '@headroom/fleet';
import { controlScripts } from '../control-scripts';
import { apiErrorCodes } from '../errors';
import type { LimitSamples } from './limit-service';

/** The balancers' code for a task refused at its integration's limit (balancer/src/errors.ts). */
const integrationAtLimitCode = 'HR_ERR_INTEGRATION_AT_LIMIT';

/** The figures kept per integration and slot; `limit` is -1 for no limit. */
const figures = ['limit', 'inflight', 'waiting', 'refused', 'tasks', 'p50', 'p99'] as const;
type Figure = (typeof figures)[number];
type Mode = 'max' | 'set';

/** One 10-second slot of one integration in one cluster. */
export interface LimitSeriesPoint {
  startUnixMs: number;
  /** The limit in flight at the slot's last sample; null: no limit, or not sampled. */
  limitInFlight: number | null;
  /** The most tasks in flight among the slot's samples; null: not sampled (no control plane ran). */
  inFlight: number | null;
  /** The most tasks waiting at the limit on the live balancers among the slot's samples; null: not sampled. */
  waiting: number | null;
  /** Tasks the balancers refused at the limit in the slot. */
  refused: number;
  /** Tasks that ended successfully in the slot (the latency's sample size). */
  tasks: number;
  /** Run time percentiles of the slot's tasks; null without tasks. The auto limiter judges the p50. */
  p50Ms: number | null;
  p99Ms: number | null;
}

export interface LimitSeriesView {
  cluster: string;
  integration: string;
  slotSeconds: number;
  /** Complete slots (settled), oldest first. */
  points: LimitSeriesPoint[];
}

export interface LimitSeriesOptions {
  sampleIntervalMs: number;
  /** A slot's latency and refusals are final this long past its end (workers and balancers add theirs every 5 s). */
  settleMs: number;
  /** @default latencyDefaults.slotMs (10 s) */
  slotMs: number;
  /** @default latencyDefaults.retentionMs (1 h): the longest series that can be read. */
  retentionMs: number;
}

export interface LimitSeriesDeps {
  redis: RedisConnection;
  keyPrefix: string;
  clusters: { baseline: string; candidate: string };
  /** Each integration's limit, in flight and waiting now (capped per cluster). */
  samples(): Promise<LimitSamples>;
  metrics: { leftOut: Gauge<'cluster'>; samples: Counter<'outcome'> };
  logger: Logger;
  options: LimitSeriesOptions;
}

export class LimitSeries {
  private readonly keys;
  private readonly scripts;
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> | undefined;

  constructor(private readonly deps: LimitSeriesDeps) {
    this.keys = latencyKeys(deps.keyPrefix);
    this.scripts = controlScripts(deps.redis);
  }

  start(): void {
    this.timer = setInterval(() => {
      if (this.sampling) return;
      this.sampling = this.sample(Date.now())
        .then(
          () => this.deps.metrics.samples.inc({ outcome: 'ok' }),
          (error: unknown) => {
            this.deps.metrics.samples.inc({ outcome: 'failed' });
            this.deps.logger.warn({ err: error }, 'limits series: a sample failed; its slot has a gap');
          },
        )
        .finally(() => (this.sampling = undefined));
    }, this.deps.options.sampleIntervalMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.sampling;
  }

  /**
   * Writes one sample: the limits, in flight and waiting now into the slot of `nowUnixMs`, and
   * the refusals and run times of every slot not yet settled (again each time: workers and
   * balancers add theirs late). Public so that tests drive the clock.
   */
  async sample(nowUnixMs: number): Promise<void> {
    const { samples, leftOut } = await this.deps.samples();
    for (const [cluster, count] of Object.entries(leftOut)) this.deps.metrics.leftOut.set({ cluster }, count);
    const now: [string, number, Mode][] = samples.flatMap((s) => [
      [fieldOf(s.cluster, s.integration, 'limit'), s.maxInFlight ?? -1, 'set'],
      [fieldOf(s.cluster, s.integration, 'inflight'), s.inflight, 'max'],
      [fieldOf(s.cluster, s.integration, 'waiting'), s.waiting, 'max'],
    ]);
    await this.write(slotStartOf(nowUnixMs, this.deps.options.slotMs), now);
    const sampled = new Set(samples.map((s) => `${s.cluster}\t${s.integration}`));
    for (const [slotStartMs, counted] of await this.countedFigures(nowUnixMs, sampled)) await this.write(slotStartMs, counted);
  }

  /** The refusals and run times of the slots that may still change (about 3), per sampled integration. */
  private async countedFigures(nowUnixMs: number, sampled: Set<string>): Promise<Map<number, [string, number, Mode][]>> {
    const { slotMs, settleMs, sampleIntervalMs } = this.deps.options;
    const slots = await readLatencySlots(this.deps.redis, this.deps.keyPrefix, settleMs + slotMs + sampleIntervalMs, { slotMs, nowUnixMs });
    let errors: [Error | null, unknown][] | null;
    try {
      errors = await this.deps.redis.pipeline(slots.map((slot) => ['hgetall', this.keys.balancerErrorSlot(slot.startUnixMs)])).exec();
    } catch (error) {
      throw new LedgerUnavailableError('limits series read', error);
    }
    const result = new Map<number, [string, number, Mode][]>();
    slots.forEach((slot, i) => {
      const [error, fields] = errors?.[i] ?? [new Error('no answer'), null];
      if (error) throw new LedgerUnavailableError('limits series read', error);
      const refused = new Map<string, number>();
      for (const count of parseBalancerErrors((fields ?? {}) as Record<string, string>))
        if (count.code === integrationAtLimitCode) refused.set(`${count.cluster}\t${count.integration}`, count.count);
      const written: [string, number, Mode][] = [];
      for (const key of sampled) {
        const [cluster, integration] = key.split('\t') as [string, string];
        const histogram = slot.clusters.get(cluster)?.get(integration);
        written.push(
          [fieldOf(cluster, integration, 'refused'), refused.get(key) ?? 0, 'max'],
          [fieldOf(cluster, integration, 'tasks'), histogram?.total ?? 0, 'max'],
        );
        if (histogram && histogram.total > 0)
          written.push(
            [fieldOf(cluster, integration, 'p50'), Math.round(histogram.quantileMs(0.5)! * 100) / 100, 'set'],
            [fieldOf(cluster, integration, 'p99'), Math.round(histogram.quantileMs(0.99)! * 100) / 100, 'set'],
          );
      }
      result.set(slot.startUnixMs, written);
    });
    return result;
  }

  private async write(slotStartMs: number, fields: [string, number, Mode][]): Promise<void> {
    if (fields.length === 0) return;
    const ttlMs = this.deps.options.retentionMs + this.deps.options.slotMs;
    await this.scripts('limit-sample', [this.keys.limitSeriesSlot(slotStartMs), ttlMs, ...fields.flat()]);
  }

  /** The settled slots of the last `windowMs` of one integration, oldest first. */
  async read(cluster: string, integration: string, windowMs: number, nowUnixMs = Date.now()): Promise<LimitSeriesView> {
    const { baseline, candidate } = this.deps.clusters;
    if (cluster !== baseline && cluster !== candidate)
      throw new HeadroomError(apiErrorCodes.notFound, `no cluster ${JSON.stringify(cluster.slice(0, 80))}; accepted: ${baseline}, ${candidate}`);
    const { slotMs, settleMs } = this.deps.options;
    const starts = slotStartsWithin(Math.min(windowMs, this.deps.options.retentionMs), nowUnixMs, slotMs).filter(
      (start) => start + slotMs + settleMs <= nowUnixMs,
    );
    const fields = figures.map((figure) => fieldOf(cluster, integration, figure));
    let answers: [Error | null, unknown][] | null;
    try {
      answers = await this.deps.redis.pipeline(starts.map((start) => ['hmget', this.keys.limitSeriesSlot(start), ...fields])).exec();
    } catch (error) {
      throw new LedgerUnavailableError('limits series read', error);
    }
    const points = starts.map((startUnixMs, i): LimitSeriesPoint => {
      const [error, values] = answers?.[i] ?? [new Error('no answer'), null];
      if (error) throw new LedgerUnavailableError('limits series read', error);
      const value = (figure: Figure): number | null => {
        const raw = (values as (string | null)[])[figures.indexOf(figure)];
        return raw === null || raw === undefined ? null : Number(raw);
      };
      const limit = value('limit');
      return {
        startUnixMs,
        limitInFlight: limit === null || limit < 0 ? null : limit,
        inFlight: value('inflight'),
        waiting: value('waiting'),
        refused: value('refused') ?? 0,
        tasks: value('tasks') ?? 0,
        p50Ms: value('p50'),
        p99Ms: value('p99'),
      };
    });
    return { cluster, integration, slotSeconds: slotMs / 1000, points };
  }
}

export const defaultLimitSeriesOptions: LimitSeriesOptions = Object.freeze({
  sampleIntervalMs: 5000,
  settleMs: 6000,
  slotMs: latencyDefaults.slotMs,
  retentionMs: latencyDefaults.retentionMs,
});

function fieldOf(cluster: string, integration: string, figure: Figure): string {
  return `${cluster}\t${integration}\t${figure}`;
}

/**
 * The incidents benchmark's scenarios, each one open-loop phase of one alternative, every task
 * recorded, then split by when it was due:
 *   slow-bank:        one integration 10x slower for a minute (IncidentSpec), at some two thirds of capacity;
 *   background-spike: 10x the background rate for a minute (BackgroundSpikeSpec), the user-present rate kept;
 *   high-load:        90% of capacity, steady.
 */
import * as os from 'node:os';
import { sampleMachineCpu } from './fleet/cpu-usage';
import {
  summariseHighLoad,
  summariseIncident,
  summariseSpike,
  type HighLoadSummary,
  type IncidentSummary,
  type PhaseCounts,
  type SpikeSummary,
} from './incidents-figures';
import type { LoadGenerator } from './load/generator';
import type { OpenLoopSpec, PhaseResult, Priority } from './load/protocol';

export const scenarioNames = ['slow-bank', 'background-spike', 'high-load'] as const;
export type ScenarioName = (typeof scenarioNames)[number];

/** `--scenario a,b`: the scenarios named, in the benchmark's own order; all when not given. */
export function parseScenarios(value: string | undefined): ScenarioName[] {
  if (value === undefined) return [...scenarioNames];
  const given = value.split(',').map((name) => name.trim());
  const unknown = given.filter((name) => !(scenarioNames as readonly string[]).includes(name));
  if (given.length === 0 || unknown.length > 0 || given.some((name) => name === ''))
    throw new RangeError(`--scenario: got ${JSON.stringify(value)}, expected one or more of ${scenarioNames.join(', ')}, separated by commas`);
  return scenarioNames.filter((name) => given.includes(name));
}

/** What every scenario's phase needs of the benchmark's settings. */
export interface PhaseSettings {
  leadInMs: number;
  maxOutstanding: number;
  taskDeadlineMs: number;
}

export interface SlowBankScenario {
  slowIntegration: string;
  slowdownFactor: number;
  tasksPerSecond: number;
  beforeMs: number;
  incidentMs: number;
}

export interface SpikeScenario {
  tasksPerSecond: number;
  /** The phase's own background tasks per second; the spike adds (factor - 1) times as many. */
  backgroundTasksPerSecond: number;
  factor: number;
  beforeMs: number;
  spikeMs: number;
}

export interface HighLoadScenario {
  tasksPerSecond: number;
  measuredMs: number;
}

/** The share of a priority mix's tasks that are `priority`. */
export function shareOf(mix: readonly { priority: Priority; weight: number }[], priority: Priority): number {
  const total = mix.reduce((sum, entry) => sum + entry.weight, 0);
  return mix.filter((entry) => entry.priority === priority).reduce((sum, entry) => sum + entry.weight, 0) / total;
}

/** Runs the phase with every task kept, and the counts every summary carries. */
async function recordedPhase(
  generator: LoadGenerator,
  spec: Omit<OpenLoopSpec, 'kind' | 'target' | 'keepTaskRecords' | 'maxOutstanding' | 'warmupMs'>,
  settings: PhaseSettings,
  who: { alternative: string; repetition: number },
  signal: AbortSignal,
): Promise<{ result: PhaseResult; counts: PhaseCounts }> {
  const machineCpu = sampleMachineCpu(os.availableParallelism());
  const full: OpenLoopSpec = {
    kind: 'open',
    target: 'balancer',
    warmupMs: settings.leadInMs,
    maxOutstanding: settings.maxOutstanding,
    keepTaskRecords: true,
    ...spec,
  };
  // The last tasks' answers come up to a deadline (and the call's margin) after the load ends,
  // later still from a generator that fell behind a spike on a busy machine: 30 s of slack was
  // too little for one (run of 2026-11-29 05:47, machine load average 14).
  const limitMs = full.warmupMs + full.durationMs + 4 * settings.taskDeadlineMs + 60_000;
  const result = await generator.run(full, signal, undefined, limitMs);
  return {
    result,
    counts: {
      ...who,
      lostTasks: (result.sentCalls ?? 0) - (result.answeredCalls ?? 0),
      dropped: result.dropped,
      machineCpuPercentOfCore: machineCpu(),
      sendLagP99Ms: result.sendLag.p99Ms,
    },
  };
}

export async function measureSlowBank(
  generator: LoadGenerator,
  scenario: SlowBankScenario,
  settings: PhaseSettings,
  who: { alternative: string; repetition: number },
  signal: AbortSignal,
): Promise<IncidentSummary> {
  const fromMs = settings.leadInMs + scenario.beforeMs;
  const untilMs = fromMs + scenario.incidentMs;
  const { result, counts } = await recordedPhase(
    generator,
    {
      tasksPerSecond: scenario.tasksPerSecond,
      durationMs: scenario.beforeMs + scenario.incidentMs,
      incident: { integration: scenario.slowIntegration, sleepFactor: scenario.slowdownFactor, fromMs, untilMs },
    },
    settings,
    who,
    signal,
  );
  return summariseIncident({
    ...counts,
    records: result.taskRecords ?? [],
    before: { fromMs: settings.leadInMs, untilMs: fromMs },
    during: { fromMs, untilMs },
    slowIntegration: scenario.slowIntegration,
    taskDeadlineMs: settings.taskDeadlineMs,
  });
}

export async function measureSpike(
  generator: LoadGenerator,
  scenario: SpikeScenario,
  settings: PhaseSettings,
  who: { alternative: string; repetition: number },
  signal: AbortSignal,
): Promise<SpikeSummary> {
  const fromMs = settings.leadInMs + scenario.beforeMs;
  const untilMs = fromMs + scenario.spikeMs;
  const { result, counts } = await recordedPhase(
    generator,
    {
      tasksPerSecond: scenario.tasksPerSecond,
      durationMs: scenario.beforeMs + scenario.spikeMs,
      backgroundSpike: { extraTasksPerSecond: scenario.backgroundTasksPerSecond * (scenario.factor - 1), fromMs, untilMs },
    },
    settings,
    who,
    signal,
  );
  return summariseSpike(
    counts,
    result.taskRecords ?? [],
    { before: { fromMs: settings.leadInMs, untilMs: fromMs }, during: { fromMs, untilMs } },
    settings.taskDeadlineMs,
  );
}

export async function measureHighLoad(
  generator: LoadGenerator,
  scenario: HighLoadScenario,
  settings: PhaseSettings,
  who: { alternative: string; repetition: number },
  signal: AbortSignal,
): Promise<HighLoadSummary> {
  const { result, counts } = await recordedPhase(
    generator,
    { tasksPerSecond: scenario.tasksPerSecond, durationMs: scenario.measuredMs },
    settings,
    who,
    signal,
  );
  const measured = { fromMs: settings.leadInMs, untilMs: settings.leadInMs + scenario.measuredMs };
  return summariseHighLoad(counts, result.taskRecords ?? [], measured, settings.taskDeadlineMs);
}

/**
 * A full run of some scenarios only (--scenario) keeps the last full run's figures of the others,
 * said to be carried over with that run's date, command and fronts, so that bench/RESULTS.md
 * never loses a scenario's tables because another one was run alone.
 */
import * as fs from 'node:fs';
import type { HighLoadSummary, IncidentSummary, SpikeSummary } from './incidents-figures';
import { judge } from './incidents-goals';
import { scenarioNames, type ScenarioName } from './incidents-scenarios';
import type { CarriedOver, IncidentsResult } from './incidents';

/** What an earlier run's JSON may hold: this shape, or the one before the spike and high load (slow bank in `summaries`). */
interface EarlierRun {
  startedAt: string;
  command: string;
  mode: string;
  capacityTasksPerSecond: number;
  offeredTasksPerSecond: number | Record<ScenarioName, number>;
  settings: { frontsPerAlternative: number; proxylessFrontsPerHeadroomAlternative?: number };
  scenarios?: ScenarioName[];
  carriedOver?: CarriedOver[];
  summaries?: IncidentSummary[];
  slowBank?: IncidentSummary[];
  backgroundSpike?: SpikeSummary[];
  highLoad?: HighLoadSummary[];
}

/** How judge() starts each scenario's goal names. */
const goalPrefix = { 'slow-bank': 'slow bank,', 'background-spike': 'background spike,', 'high-load': 'high load,' } as const;

const fieldOf = { 'slow-bank': 'slowBank', 'background-spike': 'backgroundSpike', 'high-load': 'highLoad' } as const;

function summariesOf(earlier: EarlierRun, scenario: ScenarioName): unknown[] {
  if (scenario === 'slow-bank') return earlier.slowBank ?? earlier.summaries ?? [];
  return earlier[fieldOf[scenario]] ?? [];
}

/** What `earlier` says of `scenario`'s run: its own, or what it carried over itself. */
function provenance(earlier: EarlierRun, scenario: ScenarioName): CarriedOver | undefined {
  const carried = earlier.carriedOver?.find((c) => c.scenario === scenario);
  if (carried) return carried;
  if (earlier.scenarios !== undefined && !earlier.scenarios.includes(scenario)) return undefined;
  const offered = earlier.offeredTasksPerSecond;
  return {
    scenario,
    startedAt: earlier.startedAt,
    command: earlier.command,
    capacityTasksPerSecond: earlier.capacityTasksPerSecond,
    offeredTasksPerSecond: typeof offered === 'number' ? offered : offered[scenario],
    frontsPerAlternative: earlier.settings.frontsPerAlternative,
    proxylessFrontsPerHeadroomAlternative: earlier.settings.proxylessFrontsPerHeadroomAlternative ?? 0,
  };
}

/** `result` with the scenarios it did not run taken from the full run recorded at `recordPath`, goals judged again. */
export function carryOverScenarios(result: IncidentsResult, recordPath: string): IncidentsResult {
  if (result.mode !== 'full' || !fs.existsSync(recordPath)) return result;
  const earlier = JSON.parse(fs.readFileSync(recordPath, 'utf8')) as EarlierRun;
  if (earlier.mode !== 'full') return result;
  const carried: IncidentsResult = { ...result, carriedOver: [] };
  for (const scenario of scenarioNames) {
    if (result.scenarios.includes(scenario)) continue;
    const from = provenance(earlier, scenario);
    const summaries = summariesOf(earlier, scenario);
    if (!from || summaries.length === 0) continue;
    carried.carriedOver!.push(from);
    carried.offeredTasksPerSecond = { ...carried.offeredTasksPerSecond, [scenario]: from.offeredTasksPerSecond };
    (carried as unknown as Record<string, unknown>)[fieldOf[scenario]] = summaries;
  }
  const present = scenarioNames.filter((s) => result.scenarios.includes(s) || carried.carriedOver!.some((c) => c.scenario === s));
  // A carried-over goal says so: the at-a-glance table dates each row by this run.
  const goals = judge(carried, result.settings, present).map((goal) => {
    const from = carried.carriedOver!.find((c) => goal.name.startsWith(goalPrefix[c.scenario]));
    return from ? { ...goal, name: `${goal.name} (carried over from the run of ${from.startedAt.slice(0, 10)})` } : goal;
  });
  return { ...carried, goals };
}

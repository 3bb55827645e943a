import { markdownTable } from './table';

/** One of the benchmark's targets, and whether this run met it (never a reason to fail). */
export interface Goal {
  name: string;
  target: string;
  measured: number;
  /** Decimals the measured figure is shown with. @default 2 for a target in ms, else 0 */
  digits?: number;
  /** 'stated': the figure is asked for itself, with no target to meet. */
  met: boolean | 'stated';
}

export const formatMeasured = (goal: Goal) =>
  goal.measured.toLocaleString('en-US', {
    maximumFractionDigits: goal.digits ?? (goal.target.includes('ms') ? 2 : 0),
    minimumFractionDigits: goal.digits ?? (goal.target.includes('ms') ? 2 : 0),
  });
export const formatMet = (goal: Goal) => (goal.met === 'stated' ? 'stated' : goal.met ? 'yes' : 'NO');

export function goalsTable(goals: readonly Goal[]): string {
  return markdownTable(
    ['goal', 'target', 'measured', 'met'],
    goals.map((goal) => [goal.name, goal.target, formatMeasured(goal), formatMet(goal)]),
  );
}

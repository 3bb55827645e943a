import { markdownTable } from './table';

/** One of the targets, and whether this run met it (never a reason to fail). */
export interface Goal {
  name: string;
  target: string;
  measured: number;
  met: boolean;
}

export function goalsTable(goals: readonly Goal[]): string {
  return markdownTable(
    ['goal', 'target', 'measured', 'met'],
    goals.map((goal) => [goal.name, goal.target, goal.measured.toFixed(goal.target.includes('ms') ? 2 : 0), goal.met ? 'yes' : 'NO']),
  );
}

/** Colours of the two clusters, everywhere in the UI (kept in step with styles.css). */
export const clusterColours = { baseline: '#5b6b82', candidate: '#d9731a' } as const;

/** Distinct colours for the first integrations; after these, hues spread by the golden angle. */
const firstColours = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#ff7f0e', '#7f7f7f'];

export function seriesColour(index: number): string {
  return firstColours[index] ?? `hsl(${Math.round((index * 137.508) % 360)}, 60%, 42%)`;
}

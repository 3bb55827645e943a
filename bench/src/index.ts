export type { SoakHeapSnapshots, SoakReport, SoakSeries } from './soak';
export { parsePrometheusText } from './fleet/runtime-metrics';

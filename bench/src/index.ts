export type { SoakReport, SoakSeries } from './soak';
export { parsePrometheusText } from './fleet/runtime-metrics';

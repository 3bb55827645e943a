// The benchmarks record latencies with the load generator's histogram (HDR, fixed memory).
export { LatencyHistogram, type LatencySummary } from '@headroom/sim';

/**
 * Reading a Headroom process's Prometheus metrics (`--metrics-port`) from outside it: what the
 * fault suite knows of a worker's own in-flight count and high-water mark, and of a balancer's
 * tallies, comes from there.
 */
import { parsePrometheusText } from '@headroom/bench';

export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export class MetricsText {
  constructor(readonly samples: readonly MetricSample[]) {}

  /** The sum over every series of `name` whose labels include `labels`; 0 when there is none. */
  sum(name: string, labels: Record<string, string> = {}): number {
    return this.samples
      .filter((s) => s.name === name && Object.entries(labels).every(([key, value]) => s.labels[key] === value))
      .reduce((total, s) => total + s.value, 0);
  }

  /** The value of a metric with a single series (a gauge without labels); throws when missing. */
  value(name: string): number {
    const sample = this.samples.find((s) => s.name === name);
    if (!sample) throw new Error(`metric ${name} is missing`);
    return sample.value;
  }
}

/** Prometheus text format: the lines that carry a value (the benchmarks' parser). */
export function parseMetrics(text: string): MetricsText {
  return new MetricsText(parsePrometheusText(text));
}

/**
 * GET http://127.0.0.1:<port>/metrics within `timeoutMs`. A worker whose event loop is blocked
 * does not answer: the caller decides what that means.
 */
export async function scrapeMetrics(port: number, timeoutMs = 2500): Promise<MetricsText> {
  const url = `http://127.0.0.1:${port}/metrics`;
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!response.ok) throw new Error(`answered ${response.status}`);
    return parseMetrics(await response.text());
  } catch (error) {
    throw new Error(`GET ${url} within ${timeoutMs} ms: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

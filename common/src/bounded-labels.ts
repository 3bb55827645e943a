/** Distinct integrations a process gives metric series (and Redis counts) of their own; the rest share "other". */
export const maxLabelledIntegrations = 200;

/**
 * Label values that come from input (integration names): the first `maxValues` distinct ones
 * are kept, later ones become `otherValue`, so a metric's series stay bounded whatever clients send.
 */
export class BoundedLabelValues {
  private readonly values = new Set<string>();

  constructor(
    readonly maxValues: number,
    readonly otherValue = 'other',
  ) {}

  of(value: string): string {
    if (this.values.has(value)) return value;
    if (this.values.size >= this.maxValues) return this.otherValue;
    this.values.add(value);
    return value;
  }
}

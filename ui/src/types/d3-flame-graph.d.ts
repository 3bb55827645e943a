// d3-flame-graph ships no types: the part of its API the Workers page uses
// (https://github.com/spiermar/d3-flame-graph#api-reference).
declare module 'd3-flame-graph' {
  import type { Selection } from 'd3-selection';

  /** A frame as the chart holds it: d3-hierarchy's node around the input's datum. */
  export interface FlameGraphNode<Datum> {
    data: Datum;
    depth: number;
    parent: FlameGraphNode<Datum> | null;
  }

  export interface FlameGraphTooltip<Datum> {
    text(label: (node: FlameGraphNode<Datum>) => string): FlameGraphTooltip<Datum>;
  }

  export interface FlameGraph<Datum> {
    (selection: Selection<HTMLElement, Datum, null, undefined>): void;
    width(px: number): FlameGraph<Datum>;
    cellHeight(px: number): FlameGraph<Datum>;
    minFrameSize(px: number): FlameGraph<Datum>;
    inverted(inverted: boolean): FlameGraph<Datum>;
    sort(sort: boolean): FlameGraph<Datum>;
    selfValue(selfValue: boolean): FlameGraph<Datum>;
    resetHeightOnZoom(reset: boolean): FlameGraph<Datum>;
    transitionDuration(ms: number): FlameGraph<Datum>;
    tooltip(tooltip: FlameGraphTooltip<Datum> | boolean): FlameGraph<Datum>;
    setColorMapper(mapper: (node: FlameGraphNode<Datum>, originalColour: string) => string): FlameGraph<Datum>;
    onClick(handler: (node: FlameGraphNode<Datum>) => void): FlameGraph<Datum>;
    onHover(handler: (node: FlameGraphNode<Datum>) => void): FlameGraph<Datum>;
    update(): FlameGraph<Datum>;
    resetZoom(): void;
    destroy(): FlameGraph<Datum>;
  }

  export default function flamegraph<Datum>(): FlameGraph<Datum>;
  export const tooltip: { defaultFlamegraphTooltip<Datum>(): FlameGraphTooltip<Datum> };
}

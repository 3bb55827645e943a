import { useEffect, useRef, useState } from 'react';
import { select } from 'd3-selection';
import flamegraph, { tooltip, type FlameGraph } from 'd3-flame-graph';
import { useSession } from '../../session';
import { ErrorNotice } from '../../components/ErrorNotice';
import { formatCount, formatMs, formatShare } from '../../format';
import { fetchCpuprofile } from './fetch-cpuprofile';
import { flameTreeDefaults, locationOf, type FlameFrame, type FlameTree } from './flame-tree';
import type { FlameTreeReply, FlameTreeRequest } from './flame-tree.worker';

const cellHeightPx = 18;
/** Frames narrower than this are not drawn until a zoom widens them. */
const minFrameWidthPx = 1;
const zoomTransitionMs = 300;

/** Frames that are not the application's JavaScript, in the app's greys, blues and violets. */
const colourOfKind: Partial<Record<FlameFrame['kind'], string>> = {
  root: '#d8dee7',
  node: '#a9cbea',
  native: '#c6ccd5',
  gc: '#cdbdea',
  merged: '#e6e9ee',
};

type Loading = { state: 'loading' } | { state: 'ready'; tree: FlameTree } | { state: 'failed'; error: unknown };

/** The flame graph of a finished profile: its .cpuprofile fetched, converted in a Web Worker, drawn by d3-flame-graph. */
export function ProfileFlameGraph({ profileId }: { profileId: string }) {
  const loading = useFlameTree(profileId);
  if (loading.state === 'loading') return <p className="muted">Drawing the flame graph…</p>;
  if (loading.state === 'failed') return <ErrorNotice error={loading.error} action="Drawing the flame graph" />;
  const { tree } = loading;
  if (tree.cpuUs === 0) return <p className="muted">No CPU time was sampled: nothing to draw.</p>;
  return <FlameChart tree={tree} />;
}

function useFlameTree(profileId: string): Loading {
  const { client } = useSession();
  const [loading, setLoading] = useState<Loading>({ state: 'loading' });
  useEffect(() => {
    const controller = new AbortController();
    let worker: Worker | undefined;
    setLoading({ state: 'loading' });
    void (async () => {
      try {
        const cpuprofile = await (await fetchCpuprofile(client, profileId, controller.signal)).arrayBuffer();
        if (controller.signal.aborted) return;
        worker = new Worker(new URL('./flame-tree.worker.ts', import.meta.url), { type: 'module' });
        const running = worker;
        const reply = await new Promise<FlameTreeReply>((resolve, reject) => {
          running.onmessage = (event: MessageEvent<FlameTreeReply>) => resolve(event.data);
          running.onerror = (event) => reject(new Error(`the worker that reads the profile failed: ${event.message}`));
          const request: FlameTreeRequest = { cpuprofile, options: flameTreeDefaults };
          running.postMessage(request, [cpuprofile]);
        });
        if (!reply.ok) throw new Error(reply.message);
        if (!controller.signal.aborted) setLoading({ state: 'ready', tree: reply.tree });
      } catch (error) {
        if (!controller.signal.aborted) setLoading({ state: 'failed', error });
      } finally {
        worker?.terminate();
      }
    })();
    return () => {
      controller.abort();
      worker?.terminate();
    };
  }, [client, profileId]);
  return loading;
}

function FlameChart({ tree }: { tree: FlameTree }) {
  const containerRef = useRef<HTMLDivElement>(null);
  const chartRef = useRef<FlameGraph<FlameFrame>>(undefined);
  const [hovered, setHovered] = useState<FlameFrame>();
  const [zoomedTo, setZoomedTo] = useState<FlameFrame>();

  useEffect(() => {
    const container = containerRef.current;
    if (!container) return;
    let widthPx = container.clientWidth;
    const chart = flamegraph<FlameFrame>()
      .width(widthPx)
      .cellHeight(cellHeightPx)
      .minFrameSize(minFrameWidthPx)
      // Callers on top, callees below, so the hot paths start at the top of the panel.
      .inverted(true)
      .transitionDuration(zoomTransitionMs)
      .tooltip(tooltip.defaultFlamegraphTooltip<FlameFrame>().text((node) => describeFrame(node.data, tree)))
      .setColorMapper((node, originalColour) => colourOfKind[node.data.kind] ?? originalColour)
      .onHover((node) => setHovered(node.data))
      .onClick((node) => setZoomedTo(node.parent ? node.data : undefined));
    chart(select<HTMLElement, FlameFrame>(container).datum(tree.root));
    chartRef.current = chart;
    setZoomedTo(undefined);
    setHovered(undefined);
    const resized = new ResizeObserver(() => {
      if (container.clientWidth === widthPx || container.clientWidth === 0) return;
      widthPx = container.clientWidth;
      chart.width(widthPx).update();
    });
    resized.observe(container);
    return () => {
      resized.disconnect();
      chart.destroy();
      chartRef.current = undefined;
    };
  }, [tree]);

  const shown = hovered ?? zoomedTo;
  return (
    <div className="flame-graph">
      <p className="hint">
        {formatMs(tree.cpuUs / 1000)} on the CPU ({formatMs(tree.idleUs / 1000)} idle, left out). A frame is as wide as its total time; what it called is below
        it. Hover for times, click to zoom in.
        {tree.framesMerged > 0 &&
          ` ${formatCount(tree.framesMerged)} of ${formatCount(tree.framesInProfile)} frames, each under ${formatShare(tree.minShare)} of the CPU time, are merged into "smaller frames".`}
      </p>
      <div className="flame-graph-scroll">
        <div ref={containerRef} role="figure" aria-label="Flame graph of CPU time" />
      </div>
      <p className="flame-details" data-testid="flame-details">
        {shown ? describeFrame(shown, tree) : 'Hover a frame for its function, where it is, and its times.'}
        {zoomedTo && (
          <>
            {' '}
            <button type="button" className="button-small" onClick={() => chartRef.current?.resetZoom()}>
              Show all
            </button>
          </>
        )}
      </p>
    </div>
  );
}

/** Name, where, self and total time with their shares of the CPU time: the tooltip and the line under the graph. */
function describeFrame(frame: FlameFrame, tree: FlameTree): string {
  const times = (us: number) => `${formatMs(us / 1000)} (${formatShare(us / tree.cpuUs)})`;
  switch (frame.kind) {
    case 'root':
      return `All CPU time: ${times(frame.value)}`;
    case 'merged':
      return `${frame.name}, each under ${formatShare(tree.minShare)} of the CPU time: ${times(frame.value)} together`;
    default: {
      const where = locationOf(frame) || (frame.kind === 'gc' ? "V8's garbage collector" : 'native code');
      return `${frame.name} — ${where}\nself ${times(frame.selfUs)}, total ${times(frame.value)}`;
    }
  }
}

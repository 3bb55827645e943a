/**
 * Off the page's thread: a .cpuprofile can be 16 MiB of JSON, and parsing it and walking its
 * nodes would freeze the page for a while. Gets the bytes (transferred, not copied), answers
 * with the bounded tree or what was wrong.
 */
import { parseCpuprofile, toFlameTree, type FlameTree, type FlameTreeOptions } from './flame-tree';

export interface FlameTreeRequest {
  cpuprofile: ArrayBuffer;
  options: FlameTreeOptions;
}

export type FlameTreeReply = { ok: true; tree: FlameTree } | { ok: false; message: string };

// The app is type-checked with the DOM's lib, whose `self` is a window: the worker's own scope.
const scope = self as unknown as { onmessage: ((event: MessageEvent<FlameTreeRequest>) => void) | null; postMessage(reply: FlameTreeReply): void };

scope.onmessage = (event) => {
  try {
    const profile = parseCpuprofile(new TextDecoder().decode(event.data.cpuprofile));
    scope.postMessage({ ok: true, tree: toFlameTree(profile, event.data.options) });
  } catch (error) {
    scope.postMessage({ ok: false, message: error instanceof Error ? error.message : String(error) });
  }
};

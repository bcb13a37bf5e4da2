/**
 * Two ways the sidebar's sections keep work from piling up when events arrive in bursts.
 */

/** `fn`, run at most once per animation frame however often the returned function is called
 * (a burst of events renders once). */
export function oncePerFrame(fn: () => void): () => void {
  let queued = false;
  return () => {
    if (queued) {
      return;
    }
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fn();
    });
  };
}

/** `load`, never running twice at once: a call while it runs gets the running call's promise;
 * the next call after it settles loads again. */
export function singleFlight(load: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  return () => {
    running ??= load().finally(() => {
      running = null;
    });
    return running;
  };
}

/**
 * A JupyterLab notification when an experiment started from an open notebook ends: COMPLETED
 * (with its best metric), ERROR or CANCELED, with a button that opens it — so a long search
 * can run while the user works elsewhere.
 *
 * "Started from this notebook": the experiment's recorded notebook (`notebook`: the path and
 * the submitted cells' ids, kept by forks and re-runs) is one open in this JupyterLab. Only an
 * end seen happening is announced: an experiment has to be seen running first (in an event, or
 * in the list read when the first notebook opens), so reloading the page announces nothing old.
 * One stream for everything: the shared event hub, `experiment` events only; while the hub
 * polls, only the experiments being watched are read again.
 */
import { Notification } from '@jupyterlab/apputils';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import type { DeterminedClient } from '../api/client';
import type { EventHub } from '../api/events';
import type { IExperiment } from '../api/types';
import { ExperimentEndWatch, endMessage } from '../model/experimentEnd';
import { isOriginNotebook } from './useInNotebook';

function cellIds(panel: NotebookPanel): string[] {
  return Array.from(panel.content.model?.sharedModel.cells ?? [], cell => cell.getId());
}

/** The open notebook the experiment came from (its path), or null. */
function originNotebook(notebooks: INotebookTracker, experiment: IExperiment): string | null {
  let found: string | null = null;
  notebooks.forEach(panel => {
    if (!found && isOriginNotebook(panel.context.path, cellIds(panel), experiment.notebook)) {
      found = panel.context.path;
    }
  });
  return found;
}

/**
 * Announce the end of every experiment started from a notebook open here. Starts listening
 * when the first notebook opens; returns the function that stops it.
 */
export function notifyWhenNotebookExperimentsEnd(
  client: DeterminedClient,
  hub: EventHub,
  notebooks: INotebookTracker,
  openExperiment: (id: number) => void
): () => void {
  const watch = new ExperimentEndWatch();
  let unsubscribe: (() => void) | null = null;

  const seen = (experiment: IExperiment): void => {
    if (!experiment.notebook || !watch.update(experiment)) {
      return;
    }
    const notebook = originNotebook(notebooks, experiment);
    if (notebook === null) {
      return; // its notebook is not open here: not "this notebook"
    }
    const { kind, text } = endMessage(experiment, notebook);
    const options = {
      // For someone working elsewhere: JupyterLab pauses a notice's timer while the page has
      // no focus (pauseOnFocusLoss), so it is still there when they come back, and it stays
      // in the notification center after it closes; never closing, it covered whatever lay
      // under it (a console's prompt) until dismissed.
      autoClose: 20_000,
      actions: [
        {
          label: 'Open',
          caption: `Open experiment ${experiment.id}`,
          callback: () => openExperiment(experiment.id)
        }
      ]
    };
    if (kind === 'success') {
      Notification.success(text, options);
    } else if (kind === 'error') {
      Notification.error(text, options);
    } else {
      Notification.warning(text, options);
    }
  };

  const start = (): void => {
    if (unsubscribe) {
      return;
    }
    unsubscribe = hub.subscribe({
      types: ['experiment'],
      onEvent: (_type, payload) => seen(payload as IExperiment),
      // Without the stream: read again only what is watched (a few, not the whole list).
      onPoll: () => {
        for (const id of watch.running) {
          client
            .getExperiment(id)
            .then(answer => seen(answer.experiment))
            .catch(() => undefined); // the next poll tries again
        }
      }
    });
    // What already runs: seen running now, so its end is announced.
    client
      .listExperiments()
      .then(experiments => experiments.forEach(experiment => seen(experiment)))
      .catch(() => undefined); // events still bring every experiment that changes
  };

  if (notebooks.size > 0) {
    start();
  }
  const onAdded = (): void => start();
  notebooks.widgetAdded.connect(onAdded);
  return () => {
    notebooks.widgetAdded.disconnect(onAdded);
    unsubscribe?.();
  };
}

/**
 * The error banner of an experiment: for each failed trial (four at most), the notebook cell
 * and line the error came from (`[7], line 3 of the cell `model = build(...)``) or why the trial
 * was killed, with buttons to go to that line, to the trial's logs and to a console on its
 * kernel. One implementation: `attachErrorBanner` puts it in an experiment view, the
 * notebook's widget's and the sidebar's experiment tab's alike.
 */
import type { Notebook, NotebookPanel, INotebookTracker } from '@jupyterlab/notebook';

import { h, replaceChildren } from '../dom';
import type { INotebookOrigin } from '../api/types';
import type { ExperimentView } from './experimentView';
import { kernelConsoleAction } from '../model/states';
import {
  IBannerLine,
  INotebookError,
  TrialWithErrors,
  errorBannerLines
} from '../model/notebookErrors';

/**
 * Go to the error's cell and line; resolves false when the notebook or the cell cannot be
 * found (the cell was deleted, the notebook moved). `origin`: the experiment's `notebook`.
 */
export type GoToCell = (
  error: INotebookError,
  origin: INotebookOrigin | null | undefined
) => Promise<boolean>;

export interface IErrorBannerOptions {
  /** Without it (no notebooks in this app) there are no "Go to cell" buttons. */
  goToCell?: GoToCell;
  /** Opens a console on a kernel trial's kernel; without it no "Debug in console". */
  onAttach?: (trialId: number) => void;
}

export class ErrorBanner {
  readonly node = h('div', { class: 'jp-Det-nbBanner' });

  constructor(private readonly _options: IErrorBannerOptions = {}) {
    this.node.hidden = true;
  }

  /** Show the failures of `view`'s trials (hidden while there are none). */
  render(view: ExperimentView): void {
    const lines = errorBannerLines(view.model.trials.values() as Iterable<TrialWithErrors>);
    const experiment = view.model.experiment;
    if (experiment?.state === 'ERROR' && !lines.length) {
      lines.push({
        trialId: -1,
        text: `Experiment ${experiment.id} ended in ERROR.`,
        cellId: null,
        error: null
      });
    }
    if (!lines.length) {
      replaceChildren(this.node);
      this.node.hidden = true;
      return;
    }
    this.node.hidden = false;
    const shown = lines.slice(0, 4).map(line => this._line(line, view));
    const more =
      lines.length > 4
        ? h('div', null, `… and ${lines.length - 4} more failed trials (see Trials).`)
        : null;
    replaceChildren(this.node, ...shown, more);
  }

  private _line(line: IBannerLine, view: ExperimentView): HTMLElement {
    const error = line.error;
    const goToCell = this._options.goToCell;
    const canGo = goToCell && error && (error.cell_id || typeof error.cell_index === 'number');
    const goButton: HTMLElement | null = canGo
      ? h(
          'button',
          {
            class: 'jp-Det-button jp-Det-nbGoToCell',
            attrs: {
              title:
                typeof error.line === 'number'
                  ? `Select the cell and put the cursor on line ${error.line}`
                  : 'Select the cell'
            },
            on: {
              click: () =>
                void goToCell(error, view.model.experiment?.notebook).then(found => {
                  if (!found && goButton) {
                    goButton.textContent = 'Cell not found';
                    goButton.title =
                      'The cell is no longer in the notebook (deleted, or the notebook moved).';
                  }
                })
            }
          },
          'Go to cell'
        )
      : null;
    const showLogs =
      line.trialId >= 0
        ? h(
            'button',
            {
              class: 'jp-Det-button jp-Det-nbShowLogs',
              on: { click: () => view.showTrialLogs(line.trialId) }
            },
            'Show logs'
          )
        : null;
    // A failed kernel trial's kernel is kept for post-mortem (environment.kernel) until its
    // keep_alive runs out: the button only while it is.
    const onAttach = this._options.onAttach;
    const trial = view.model.trials.get(line.trialId);
    const debug =
      trial && onAttach && view.runsInKernels && kernelConsoleAction(trial) === 'debug'
        ? h(
            'button',
            {
              class: 'jp-Det-button jp-Det-nbDebug',
              attrs: { title: "A console on the failed trial's kernel: %debug, its globals" },
              on: { click: () => onAttach(line.trialId) }
            },
            'Debug in console'
          )
        : null;
    return h(
      'div',
      { class: 'jp-Det-nbBanner-line', attrs: { role: 'alert' } },
      h('span', { class: 'jp-Det-nbBanner-text' }, line.text),
      goButton,
      showLogs,
      debug
    );
  }
}

/**
 * Put a banner under `view`'s header and keep it current: how the notebook's widget and the
 * sidebar's experiment tab both show it.
 */
export function attachErrorBanner(
  view: ExperimentView,
  options: IErrorBannerOptions = {}
): ErrorBanner {
  const banner = new ErrorBanner(options);
  const header = view.node.querySelector('.jp-Det-expHeader');
  if (header) {
    header.after(banner.node);
  } else {
    view.node.prepend(banner.node);
  }
  // Trials and the experiment's state decide it (not the metrics, which come by hundreds).
  const disconnect = view.model.changed.connect(part => {
    if (part === undefined || part === 'trials' || part === 'experiment') {
      banner.render(view);
    }
  });
  view.disposed.connect(disconnect);
  banner.render(view);
  return banner;
}

/**
 * Select the error's cell in `notebook`, scroll to it and put the cursor at the start of the
 * error's line (the cell's editor in edit mode); false when the notebook has no such cell.
 */
export async function revealErrorLine(notebook: Notebook, error: INotebookError): Promise<boolean> {
  const cells = notebook.widgets;
  let index = error.cell_id ? cells.findIndex(cell => cell.model.id === error.cell_id) : -1;
  if (index < 0 && !error.cell_id && typeof error.cell_index === 'number') {
    index = error.cell_index < cells.length ? error.cell_index : -1;
  }
  if (index < 0) {
    return false;
  }
  notebook.deselectAll();
  notebook.activeCellIndex = index;
  await notebook.scrollToItem(index, 'center');
  const cell = notebook.widgets[index];
  await cell.ready;
  const editor = cell.editor;
  if (editor && typeof error.line === 'number' && cell.model.type === 'code') {
    const line = Math.max(0, Math.min(error.line - 1, editor.lineCount - 1));
    notebook.mode = 'edit';
    editor.setCursorPosition({ line, column: 0 });
    editor.revealPosition({ line, column: 0 });
    editor.focus();
  }
  return true;
}

/** The error's notebook among the open ones: the one holding its cell, else at its path. */
export function openErrorNotebook(
  notebooks: INotebookTracker,
  error: INotebookError,
  origin: INotebookOrigin | null | undefined
): NotebookPanel | null {
  const panels: NotebookPanel[] = [];
  notebooks.forEach(panel => {
    panels.push(panel);
  });
  const holds = (panel: NotebookPanel): boolean =>
    !!error.cell_id && panel.content.widgets.some(cell => cell.model.id === error.cell_id);
  const recorded = error.notebook ?? origin?.path ?? null;
  const atPath = (panel: NotebookPanel): boolean =>
    !!recorded && (recorded === panel.context.path || recorded.endsWith(`/${panel.context.path}`));
  return (
    panels.find(panel => holds(panel) && atPath(panel)) ??
    panels.find(atPath) ??
    panels.find(holds) ??
    null
  );
}

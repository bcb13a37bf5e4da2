/**
 * The error banner of the notebook's experiment widget: for each failed trial (four at most),
 * the notebook cell and line the error came from or why the trial was killed, with buttons to
 * go to that cell and to the trial's logs.
 */
import { INotebookTracker } from '@jupyterlab/notebook';

import { h, replaceChildren } from '../dom';
import type { ExperimentView } from '../views/experimentView';
import { kernelConsoleAction } from '../model/states';
import { IBannerLine, TrialWithErrors, errorBannerLines } from './widgetModel';

export class ErrorBanner {
  readonly node = h('div', { class: 'jp-Det-nbBanner' });

  /**
   * `output`: the widget's element (finds the notebook it is in); `notebooks`: the app's
   * notebooks, null where there are none (no "Go to cell" then).
   */
  constructor(
    private readonly _output: HTMLElement,
    private readonly _notebooks: INotebookTracker | null,
    private readonly _onAttach?: (trialId: number) => void
  ) {}

  /** Show the failures of `view`'s trials (hidden while there are none). */
  render(view: ExperimentView): void {
    const lines = errorBannerLines(view.model.trials.values() as Iterable<TrialWithErrors>);
    const experiment = view.model.experiment;
    if (experiment?.state === 'ERROR' && !lines.length) {
      lines.push({
        trialId: -1,
        text: `Experiment ${experiment.id} ended in ERROR.`,
        cellId: null
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
    const cellId = line.cellId;
    const goToCell =
      cellId && this._notebooks
        ? h(
            'button',
            {
              class: 'jp-Det-button jp-Det-nbGoToCell',
              on: { click: () => this._goToCell(cellId) }
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
    const onAttach = this._onAttach;
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
      goToCell,
      showLogs,
      debug
    );
  }

  private _goToCell(cellId: string): void {
    const panel =
      this._notebooks?.find(p => p.node.contains(this._output)) ?? this._notebooks?.currentWidget;
    const notebook = panel?.content;
    if (!notebook) {
      return;
    }
    const index = notebook.widgets.findIndex(cell => cell.model.id === cellId);
    if (index >= 0) {
      notebook.activeCellIndex = index;
      void notebook.scrollToItem(index, 'center');
    }
  }
}

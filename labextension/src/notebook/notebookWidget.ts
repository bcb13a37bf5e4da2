/**
 * The experiment widget under a notebook cell: a MIME renderer for
 * `application/vnd.determined.experiment+json` (written by jupyter_determined.kernel._widget).
 *
 * It is the sidebar's experiment view, embedded, plus what only a cell output needs:
 *
 * * it talks to the master from the browser, so its buttons work while the kernel is busy
 *   (a `--wait` cell) or gone, and a flood of output in the kernel cannot freeze it;
 * * it reconciles with the API on a timer (events only make it quicker), so its state and
 *   progress are right even when events were lost;
 * * it starts from the snapshot the output carries (instant first paint), shows that snapshot
 *   when the master cannot be reached (saying so, and reconnecting), and writes the final
 *   state back into the output, so a saved notebook shows what happened;
 * * a bounded tail of the latest log lines (long lines cut, floods summarised);
 * * an error banner for failed trials: the notebook cell and line the error came from, why a
 *   trial was killed, and links to the cell and to the logs.
 */
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Panel, Widget } from '@lumino/widgets';

import {
  DeterminedClient,
  MASTER_STOPPING_NOTE,
  describeError,
  isMasterStopping
} from '../api/client';
import { EventHub } from '../api/events';
import { decodeNonFinite, encodeNonFinite } from '../api/nonFinite';
import { h, replaceChildren } from '../dom';
import { ExperimentView } from '../views/experimentView';
import { useInNotebookHandler } from './notebookInsert';
import type { IExperiment, ILogLine, IMetricReport, ITrial } from '../api/types';
import {
  attachErrorBanner,
  openErrorNotebook,
  revealErrorLine,
  type GoToCell
} from './notebookBanner';
import { IExperimentOutputData, LOG_TAIL_LINES, LOG_TAIL_TRIALS, LogTail } from './widgetModel';
import { EXPERIMENT_MIME_TYPE, TERMINAL_EXPERIMENT_STATES } from '../api/contract.generated';

export { EXPERIMENT_MIME_TYPE };

/** Terminal experiment states (and a deleted experiment's): nothing changes after these. */
const TERMINAL = new Set<string>([...TERMINAL_EXPERIMENT_STATES, 'DELETED']);

/** How often the widget reconciles with the API while the experiment runs (ms). */
export const RECONCILE_MS = 2000;
/** The longest wait between reconnection attempts (ms). */
const MAX_RETRY_MS = 10000;

/** Outputs rendered so far in this page (their views need distinct DOM ids). */
let outputCount = 0;

/** The live widget of one experiment in a notebook output. */
export class ExperimentOutput extends Panel implements IRenderMime.IRenderer {
  private _view: ExperimentView | null = null;
  private _experimentId: number | null = null;
  private _model: IRenderMime.IMimeModel | null = null;
  private _status = h('div', { class: 'jp-Det-nbStatus', attrs: { 'aria-live': 'polite' } });
  private _logs = h('pre', { class: 'jp-Det-nbLogs' });
  private _tail = new LogTail();
  private _timer = 0;
  private _retryMs = RECONCILE_MS;
  private _connected: boolean | null = null;
  private _live = false;
  private _lastState = '';
  private _lastUpdate: Date | null = null;
  private _wroteFinal = false;
  /** The experiment as the output's snapshot recorded it. */
  private _savedExperiment: IExperiment | null = null;

  constructor(
    private readonly _client: DeterminedClient,
    private readonly _hub: EventHub,
    private readonly _notebooks: INotebookTracker | null,
    private readonly _onAttach?: (trialId: number) => void
  ) {
    super();
    this.addClass('jp-Det-notebookWidget');
  }

  get experimentId(): number | null {
    return this._experimentId;
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[EXPERIMENT_MIME_TYPE] as unknown as IExperimentOutputData | undefined;
    this._model = model;
    const id = Number(data?.experiment_id);
    if (!Number.isInteger(id)) {
      this.addWidget(
        new Widget({
          node: h('div', { class: 'jp-Det-error' }, 'This Determined output names no experiment.')
        })
      );
      return;
    }
    if (this._experimentId === id && this._view) {
      // The kernel rewrote the output (its final snapshot, for readers without this
      // extension). The view changes one way only, from the master's API: nothing to apply.
      return;
    }
    this._experimentId = id;
    // "Use in notebook" inserts below the active cell of the notebook holding this output.
    const useInNotebook = useInNotebookHandler(this._client, this._notebooks, () => this);
    this._view = new ExperimentView(
      id,
      this._client,
      this._hub,
      undefined,
      useInNotebook,
      this._onAttach
    );
    // The experiment tab shows the same banner (index.ts).
    attachErrorBanner(this._view, {
      goToCell: this._notebooks ? this._goToCell : undefined,
      onAttach: this._onAttach
    });
    this._view.addClass('jp-Det-embedded');
    this._view.id = `${this._view.id}-output-${++outputCount}`; // the tab's view has the plain id
    this.node.dataset.experimentId = String(id);
    this._applySnapshot(data!);
    // Children are widgets of this panel: a renderer is not in the page yet when it renders.
    this.addWidget(new Widget({ node: this._status }));
    this.addWidget(this._view);
    this.addWidget(new Widget({ node: this._logs }));
    this._renderStatus();
    await this._reconcile();
  }

  /** Fill the view from the output's snapshot (what was true when it was last written). */
  private _applySnapshot(data: IExperimentOutputData): void {
    // Saved as the master answers it: a diverged metric as "NaN" (api/nonFinite.ts).
    const snapshot = decodeNonFinite(data.snapshot) as IExperimentOutputData['snapshot'];
    const view = this._view;
    if (!snapshot || !view) {
      return;
    }
    if (snapshot.experiment && snapshot.experiment.state) {
      this._savedExperiment = snapshot.experiment;
      view.model.setExperiment(snapshot.experiment);
    }
    view.model.setTrials(snapshot.trials ?? []);
    view.model.addMetrics(snapshot.metrics ?? []);
    const byTrial = new Map<number, ILogLine[]>();
    for (const line of snapshot.logs ?? []) {
      byTrial.set(line.trial_id, [...(byTrial.get(line.trial_id) ?? []), line]);
    }
    byTrial.forEach((lines, trialId) => this._tail.add(trialId, lines));
    this._lastUpdate = snapshot.taken_at ? new Date(snapshot.taken_at) : null;
    this._renderLogs();
  }

  /** One round of reconciliation: the experiment, its trials, the log tail; then the next. */
  private async _reconcile(): Promise<void> {
    window.clearTimeout(this._timer);
    const id = this._experimentId;
    const view = this._view;
    if (id === null || !view || this.isDisposed) {
      return;
    }
    let next = RECONCILE_MS;
    try {
      const { experiment, trials } = await this._client.getExperiment(id);
      if (this.isDisposed) {
        return;
      }
      // Ids are per master: a notebook opened against another master may find a different
      // experiment under the same id. Its start time tells them apart.
      const saved = this._savedExperiment;
      if (
        !this._live &&
        saved?.start_time &&
        experiment.start_time &&
        saved.start_time !== experiment.start_time
      ) {
        this._setConnected(
          false,
          `Experiment ${id} on this master is not the one this notebook ran (started ${experiment.start_time}, not ${saved.start_time}); showing the snapshot saved in the notebook.`
        );
        return;
      }
      // Only what changed goes in: every change re-renders, and a header rebuilt under the
      // pointer every two seconds would swallow clicks on its buttons.
      if (
        JSON.stringify(view.model.experiment) !==
        JSON.stringify({ ...view.model.experiment, ...experiment })
      ) {
        view.model.setExperiment(experiment);
      }
      const changed = trials.filter(
        trial => JSON.stringify(view.model.trials.get(trial.id)) !== JSON.stringify(trial)
      );
      if (changed.length) {
        view.model.setTrials(changed);
      }
      this._lastUpdate = new Date();
      this._setConnected(true);
      if (!this._live) {
        this._live = true;
        void view.start(); // events, curves, checkpoints
      } else if (experiment.state !== this._lastState) {
        void view.refresh(); // the last reports of a finishing experiment
      }
      this._lastState = experiment.state;
      await this._pollLogs(trials);
      this._retryMs = RECONCILE_MS;
      if (TERMINAL.has(experiment.state)) {
        await view.refresh();
        this._writeFinalSnapshot();
        this._renderStatus();
        return; // nothing changes any more
      }
    } catch (error) {
      if (this.isDisposed) {
        return;
      }
      const status = (error as { status?: number }).status;
      if (status === 404) {
        this._setConnected(
          false,
          `Experiment ${id} is not on this master (it was run elsewhere, or deleted); showing the snapshot saved in the notebook.`
        );
        return; // no point retrying
      }
      this._setConnected(
        false,
        isMasterStopping(error)
          ? `${MASTER_STOPPING_NOTE} — reconnecting…`
          : `Disconnected from the master (${describeError(error)}) — reconnecting…`
      );
      this._retryMs = Math.min(this._retryMs * 2, MAX_RETRY_MS);
      next = this._retryMs;
    }
    this._timer = window.setTimeout(() => void this._reconcile(), next);
  }

  private async _pollLogs(trials: ITrial[]): Promise<void> {
    const running = trials.filter(trial => trial.state === 'ACTIVE' || !TERMINAL.has(trial.state));
    const recent = (running.length ? running : [...trials].sort((a, b) => b.id - a.id)).slice(
      0,
      LOG_TAIL_TRIALS
    );
    let changed = false;
    for (const trial of recent) {
      try {
        changed =
          this._tail.add(
            trial.id,
            await this._client.trialLogs(trial.id, { tail: LOG_TAIL_LINES })
          ) || changed;
      } catch {
        // the next round tries again; the status line reports a lost master
      }
    }
    if (changed) {
      this._renderLogs();
    }
  }

  private _setConnected(connected: boolean, message = ''): void {
    this._connected = connected;
    this.node.classList.toggle('jp-Det-mod-disconnected', !connected);
    this._statusMessage = message;
    this._renderStatus();
  }

  private _statusMessage = '';

  private _renderStatus(): void {
    const when = this._lastUpdate ? this._lastUpdate.toLocaleTimeString() : 'never';
    if (this._connected === false) {
      replaceChildren(
        this._status,
        h('span', { class: 'jp-Det-nbStatus-dot jp-mod-off' }),
        h('span', { class: 'jp-Det-nbStatus-text' }, `${this._statusMessage} Last update: ${when}.`)
      );
      this._status.dataset.connection = 'disconnected';
      return;
    }
    const state = this._view?.model.experiment?.state ?? '';
    // "Finished" only once the final state is in the output (`_writeFinalSnapshot`): the model
    // turns terminal first (the event stream, the round's fetch), and a notebook saved on
    // seeing "Finished" would otherwise keep the snapshot of a running experiment.
    const done = TERMINAL.has(state) && this._wroteFinal;
    replaceChildren(
      this._status,
      h('span', {
        class: `jp-Det-nbStatus-dot ${done ? 'jp-mod-done' : this._connected ? 'jp-mod-live' : ''}`
      }),
      h(
        'span',
        { class: 'jp-Det-nbStatus-text' },
        this._connected === null
          ? 'Connecting to the master…'
          : done
            ? `Finished (${state}); updated ${when}.`
            : `Live; updated ${when}.`
      )
    );
    this._status.dataset.connection = this._connected === null ? 'connecting' : 'live';
  }

  /** "Go to cell": in the notebook holding this output (else the error's, if open). */
  private _goToCell: GoToCell = async (error, origin) => {
    const notebooks = this._notebooks;
    const panel =
      notebooks?.find(candidate => candidate.node.contains(this.node)) ??
      (notebooks ? openErrorNotebook(notebooks, error, origin) : null);
    return panel ? revealErrorLine(panel.content, error) : false;
  };

  private _renderLogs(): void {
    const lines = this._tail.text();
    this._logs.textContent = lines.join('\n');
    this._logs.hidden = lines.length === 0;
  }

  /**
   * Write the final state into the output once, so the saved notebook records how it ended
   * even when the kernel that displayed it is gone.
   */
  private _writeFinalSnapshot(): void {
    const view = this._view;
    const model = this._model;
    if (this._wroteFinal || !view || !model || !view.model.experiment) {
      return;
    }
    this._wroteFinal = true;
    const previous = (
      model.data[EXPERIMENT_MIME_TYPE] as unknown as IExperimentOutputData | undefined
    )?.snapshot;
    if (previous?.experiment?.state === view.model.experiment.state) {
      return; // the kernel already wrote it
    }
    const metrics: IMetricReport[] = [];
    for (const byTrial of view.model.metrics.values()) {
      for (const reports of byTrial.values()) {
        metrics.push(...reports.slice(-200));
      }
    }
    const snapshot = {
      experiment: view.model.experiment,
      trials: [...view.model.trials.values()],
      metrics: metrics.slice(-5000),
      logs: [],
      taken_at: new Date().toISOString()
    };
    model.setData({
      data: {
        ...model.data,
        [EXPERIMENT_MIME_TYPE]: {
          experiment_id: view.experimentId,
          snapshot: encodeNonFinite(snapshot)
        } as unknown as IRenderMime.IMimeModel['data'][string]
      }
    });
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearTimeout(this._timer);
    this._view?.dispose();
    super.dispose();
  }
}

/** The renderer factory the plugin registers with the app's rendermime registry. */
export function experimentRendererFactory(
  client: DeterminedClient,
  hub: EventHub,
  notebooks: INotebookTracker | null,
  onAttach?: (trialId: number) => void
): IRenderMime.IRendererFactory {
  return {
    safe: true, // renders data as text and SVG, never as markup from the output
    mimeTypes: [EXPERIMENT_MIME_TYPE],
    defaultRank: 10, // ahead of text/html (50): the live view wins where the extension runs
    createRenderer: () => new ExperimentOutput(client, hub, notebooks, onAttach)
  };
}

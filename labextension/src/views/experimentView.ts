/**
 * The experiment view (a main-area tab): header with state and actions, then sections for
 * trials, learning curves, hyperparameters, logs, checkpoints and the config.
 */
import { Widget } from '@lumino/widgets';

import {
  DeterminedClient,
  MASTER_STOPPING_NOTE,
  describeError,
  isMasterStopping
} from '../api/client';
import { EventHub } from '../api/events';
import { checkpointsTable, configView } from './checkpointsSection';
import { CompareSection } from './compareView';
import { CurvesSection } from './curvesView';
import { errorBox, h, noteBox, replaceChildren } from '../dom';
import { ACTION_TEXT, confirmAction, headerContent } from './experimentHeader';
import { registerDialog, runAgainHandler } from './actionDialogs';
import { ExperimentAction, isTerminal, runCounts } from '../model/states';
import { bestTrialId } from '../model/trialTable';
import { experimentTabTitle } from '../model/experimentTable';
import { HparamsSection } from './hparamsView';
import { LogsSection } from './logsSection';
import { ExperimentDataModel, ViewPart } from '../model/model';
import { SectionTabs } from './sectionTabs';
import { onThemeChange } from '../chart/theme';
import { MAX_SELECTED_TRIALS, TrialSelection } from '../model/trialSelection';
import { trialsTable } from './trialsView';
import type { EventType, INotebookOrigin } from '../api/types';

type Section = 'trials' | 'curves' | 'hparams' | 'compare' | 'logs' | 'checkpoints' | 'config';

const SECTIONS: [Section, string][] = [
  ['trials', 'Trials'],
  ['curves', 'Learning curves'],
  ['hparams', 'Hyperparameters'],
  ['compare', 'Compare'],
  ['logs', 'Logs'],
  ['checkpoints', 'Checkpoints'],
  ['config', 'Config']
];

export class ExperimentView extends Widget {
  readonly model: ExperimentDataModel;
  private _tabs = new SectionTabs(SECTIONS, section => this.showSection(section));
  private _header: HTMLElement;
  /** What the header was last drawn from: it is redrawn only when that changes. */
  private _headerKey = '';
  private _message: HTMLElement;
  private _unsubscribe: (() => void) | null = null;
  private _renderQueued = new Set<ViewPart>();
  private _frame = 0;
  private _refreshing: Promise<void> | null = null;
  /** Trial colours in tables follow the theme, as the charts do. */
  private _disconnectTheme: () => void;

  // trials
  private _sortKey = 'id';
  private _sortAscending = true;
  /** The trials plotted and compared, and fetching their curves. */
  private _selection: TrialSelection;
  /** The Checkpoints section lists DELETED checkpoints too (the user ticked it). */
  private _showDeletedCheckpoints = false;

  private _curves: CurvesSection;
  private _hparams = new HparamsSection(id => this._toggleTrial(id));
  private _compare = new CompareSection();

  private _logs: LogsSection;

  constructor(
    readonly experimentId: number,
    private readonly _client: DeterminedClient,
    private readonly _hub: EventHub,
    /** Opens the experiment's TensorBoard in a tab; without it the header has no such button. */
    private readonly _openTensorBoard?: (experimentId: number) => Promise<void>,
    /** "Use in notebook" of a checkpoint (notebookInsert.ts); none: no such buttons. */
    private readonly _useInNotebook?: (
      uuid: string,
      origin?: INotebookOrigin | null
    ) => Promise<void>,
    /** Opens a console on a kernel trial's kernel; none: no Attach buttons. */
    private readonly _onAttach?: (trialId: number) => void
  ) {
    super();
    this.model = new ExperimentDataModel(experimentId);
    this._selection = new TrialSelection(this.model, _client);
    this._logs = new LogsSection(_client, _hub, () => this._queue('logs'), experimentId);
    this.id = `jupyter-determined-experiment-${experimentId}`;
    this.addClass('jp-Det-experimentView');
    this.node.dataset.experimentId = String(experimentId);
    this.title.label = `Experiment ${experimentId}`;
    this.title.closable = true;

    this._header = h('div', { class: 'jp-Det-expHeader' }, `Loading experiment ${experimentId}…`);
    this._message = h('div', { class: 'jp-Det-message' });
    this._tabs.node('hparams').appendChild(this._hparams.node);
    this._tabs.node('compare').appendChild(this._compare.node);
    this._tabs.node('logs').appendChild(this._logs.node);
    this._curves = new CurvesSection(this._tabs.node('curves'), () => this._renderCurves());
    this.node.append(this._header, this._message, this._tabs.tabs, this._tabs.sections);
    this.model.changed.connect(part => this._queue(part));
    this._disconnectTheme = onThemeChange(() => {
      this._queue('trials');
      this._queue('metrics');
    });
    this.showSection('trials');
  }

  /** Load everything and start following events. */
  async start(): Promise<void> {
    if (!this._unsubscribe) {
      this._unsubscribe = this._hub.subscribe({
        types: ['experiment', 'trial', 'metric', 'checkpoint'],
        onEvent: (type, payload) => this._onEvent(type, payload),
        onPoll: () => void this.refresh()
      });
    }
    await this.refresh();
  }

  async refresh(): Promise<void> {
    if (this._refreshing) {
      return this._refreshing;
    }
    this._refreshing = (async () => {
      try {
        const { experiment, trials } = await this._client.getExperiment(this.experimentId);
        this.node.classList.remove('jp-Det-mod-failed');
        this.model.setExperiment(experiment);
        this.model.setTrials(trials);
        this._selection.selectDefaults();
        const [, checkpoints] = await Promise.all([
          this._selection.loadCurves(),
          this._client.listCheckpoints(this.experimentId)
        ]);
        this.model.setCheckpoints(checkpoints);
        replaceChildren(this._message);
        await this._logs.catchUp();
      } catch (error) {
        if (!this.model.experiment) {
          // Nothing to show but the error: no "loading…" header, no empty tabs.
          replaceChildren(
            this._header,
            h('span', { class: 'jp-Det-expTitle' }, `Experiment ${this.experimentId}`)
          );
          this.node.classList.add('jp-Det-mod-failed');
        }
        replaceChildren(
          this._message,
          isMasterStopping(error)
            ? noteBox(MASTER_STOPPING_NOTE)
            : errorBox(`Cannot load experiment ${this.experimentId}: ${describeError(error)}`)
        );
      } finally {
        this._refreshing = null;
      }
    })();
    return this._refreshing;
  }

  /** Fetch the curves of trials that just joined the selection (errors shown, not thrown). */
  private _loadNewCurves(): void {
    this._selection
      .loadCurves(true)
      .catch(error =>
        replaceChildren(
          this._message,
          isMasterStopping(error)
            ? noteBox(MASTER_STOPPING_NOTE)
            : errorBox(`Cannot load the learning curves: ${describeError(error)}`)
        )
      );
  }

  /** Add or remove one trial from the selection (the curves and the comparison). */
  private _toggleTrial(trialId: number, on = !this._selection.has(trialId)): void {
    if (this._selection.toggle(trialId, on)) {
      this._loadNewCurves();
    }
    this._queue('trials');
    this._queue('metrics');
  }

  /** Replace the selection (the Trials toolbar's buttons). */
  private _setSelection(ids: number[]): void {
    this._selection.replace(ids);
    this._loadNewCurves();
    this._queue('trials');
    this._queue('metrics');
  }

  private _onEvent(type: EventType, payload: unknown): void {
    this.model.applyEvent(type, payload);
  }

  showSection(section: Section): void {
    this._tabs.show(section);
    this._logs.setShown(section === 'logs');
    this._queue(
      section === 'logs' ? 'logs' : section === 'checkpoints' ? 'checkpoints' : 'metrics'
    );
    this._queue('trials');
  }

  // ---- rendering ------------------------------------------------------------------------------

  private _queue(part: ViewPart): void {
    this._renderQueued.add(part);
    if (this._frame) {
      return;
    }
    // Metric events can come hundreds a second: render at most once per frame.
    this._frame = requestAnimationFrame(() => {
      this._frame = 0;
      const parts = new Set(this._renderQueued);
      this._renderQueued.clear();
      this._render(parts);
    });
  }

  private _render(parts: Set<ViewPart>): void {
    const trialsChanged = parts.has('trials') || parts.has('experiment');
    if (trialsChanged && this._selection.selectDefaults()) {
      this._loadNewCurves();
    }
    if (trialsChanged) {
      this._renderHeader();
    }
    if (parts.has('experiment')) {
      this._renderConfig();
    }
    if (trialsChanged) {
      if (this._tabs.current === 'trials') {
        this._renderTrials();
      }
      if (this._tabs.current === 'hparams') {
        this._renderHparams();
      }
      if (this._tabs.current === 'logs') {
        this._logs.renderControls([...this.model.trials.keys()].sort((a, b) => a - b));
      }
    }
    if ((parts.has('metrics') || trialsChanged) && this._tabs.current === 'curves') {
      this._renderCurves();
    }
    if ((parts.has('metrics') || trialsChanged) && this._tabs.current === 'compare') {
      this._renderCompare();
    }
    // An ended experiment's empty table says it will save none, so the state matters too.
    if (
      (parts.has('checkpoints') || parts.has('experiment')) &&
      this._tabs.current === 'checkpoints'
    ) {
      this._renderCheckpoints();
    }
    if (parts.has('logs') && this._tabs.current === 'logs') {
      this._logs.renderLines();
    }
  }

  private _renderHeader(): void {
    const experiment = this.model.experiment;
    if (!experiment) {
      return;
    }
    const counts = runCounts(this.model.trials.values());
    // Rebuilt only when something it shows changed: a header redrawn under the pointer on
    // every trial event would swallow clicks on its buttons.
    const key = JSON.stringify([experiment, counts]);
    if (key === this._headerKey) {
      return;
    }
    this._headerKey = key;
    this.title.label = experimentTabTitle(experiment.id, experiment.name);
    this.title.caption = `Determined ${experimentTabTitle(experiment.id, experiment.name)} (${experiment.state})`;
    replaceChildren(
      this._header,
      ...headerContent(
        experiment,
        counts,
        action => void this.runAction(action),
        this._openTensorBoard ? () => void this.openTensorBoard() : undefined
      )
    );
  }

  /** Start (or find) the experiment's TensorBoard and open it; failures show in the view. */
  async openTensorBoard(): Promise<void> {
    if (!this._openTensorBoard) {
      return;
    }
    replaceChildren(
      this._message,
      h('div', { class: 'jp-Det-info' }, 'Starting TensorBoard… (a few seconds)')
    );
    try {
      await this._openTensorBoard(this.experimentId);
      replaceChildren(this._message);
    } catch (error) {
      replaceChildren(this._message, errorBox(`TensorBoard failed: ${describeError(error)}`));
    }
  }

  /** Confirm, run one action, and show the outcome (the state arrives by event or refresh). */
  async runAction(action: ExperimentAction): Promise<void> {
    const experiment = this.model.experiment;
    const name = experiment
      ? `experiment ${experiment.id} (${experiment.name})`
      : `experiment ${this.experimentId}`;
    if (!(await confirmAction(action, name))) {
      return;
    }
    const text = ACTION_TEXT[action];
    try {
      const updated = await this._client.experimentAction(this.experimentId, action);
      this.model.setExperiment(updated);
      replaceChildren(this._message);
    } catch (error) {
      replaceChildren(
        this._message,
        isMasterStopping(error)
          ? noteBox(`${text.label}: not now. ${MASTER_STOPPING_NOTE}`)
          : errorBox(`${text.label} failed: ${describeError(error)}`)
      );
    }
  }

  private _bestTrialId(): number | null {
    const { metric, smallerIsBetter } = this._selection;
    return bestTrialId(this.model.trials.values(), metric, smallerIsBetter);
  }

  private _renderTrials(): void {
    const node = this._tabs.node('trials');
    replaceChildren(
      node,
      ...trialsTable({
        trials: [...this.model.trials.values()],
        metric: this._selection.metric,
        smallerIsBetter: this._selection.smallerIsBetter,
        sortKey: this._sortKey,
        sortAscending: this._sortAscending,
        selected: new Set(this._selectedTrialIds()),
        maxSelected: MAX_SELECTED_TRIALS,
        onSort: key => {
          this._sortAscending = this._sortKey === key ? !this._sortAscending : true;
          this._sortKey = key;
          this._renderTrials();
        },
        onToggle: (trialId, on) => this._toggleTrial(trialId, on),
        onSelect: ids => this._setSelection(ids),
        onCompare: () => this.showSection('compare'),
        onAttach: this.runsInKernels ? this._onAttach : undefined,
        onRunAgain: runAgainHandler(this._client, this.model)
      })
    );
  }

  /** Its trials run in Jupyter kernels (`environment.kernel`), so they can be attached to. */
  get runsInKernels(): boolean {
    const environment = this.model.experiment?.config?.environment as
      Record<string, unknown> | null | undefined;
    const kernel = environment?.kernel;
    return kernel !== null && kernel !== undefined && typeof kernel === 'object';
  }

  private _selectedTrialIds(): number[] {
    return this._selection.ids();
  }

  private _renderCurves(): void {
    this._curves.render({
      experiment: this.model.experiment,
      trialIds: this._selectedTrialIds(),
      totalTrials: this.model.trials.size,
      userSelected: this._selection.userSelected,
      bestTrialId: this._bestTrialId(),
      metric: this._selection.metric,
      metricsOf: group => this.model.metricsOf(group)
    });
  }

  private _renderHparams(): void {
    this._hparams.render({
      experiment: this.model.experiment,
      trials: [...this.model.trials.values()],
      selected: new Set(this._selectedTrialIds())
    });
  }

  private _renderCompare(): void {
    const ids = this._selectedTrialIds();
    this._compare.render({
      experiment: this.model.experiment,
      trials: ids.map(id => this.model.trials.get(id)!),
      metricsOf: group => this.model.metricsOf(group)
    });
  }

  // ---- checkpoints and config -------------------------------------------------------------------

  private _renderCheckpoints(): void {
    replaceChildren(
      this._tabs.node('checkpoints'),
      checkpointsTable(this.model.checkpoints.values(), {
        metric: this._selection.metric,
        smallerIsBetter: this._selection.smallerIsBetter,
        finished: isTerminal(this.model.experiment?.state ?? ''),
        showDeleted: this._showDeletedCheckpoints,
        onShowDeleted: show => {
          this._showDeletedCheckpoints = show;
          this._renderCheckpoints();
        },
        // The experiment's notebook: the cell goes there, below its submitting cell.
        register: uuid => registerDialog(this._client, uuid),
        useInNotebook: this._useInNotebook
          ? uuid => this._useInNotebook!(uuid, this.model.experiment?.notebook ?? null)
          : undefined
      })
    );
  }

  private _renderConfig(): void {
    replaceChildren(this._tabs.node('config'), configView(this.model.experiment?.config));
  }

  /** Open the Logs section on one trial (the notebook widget's error banner links here). */
  showTrialLogs(trialId: number): void {
    this.showSection('logs');
    void this._logs.selectTrial(trialId);
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._unsubscribe?.();
    this._logs.dispose();
    this._disconnectTheme();
    if (this._frame) {
      cancelAnimationFrame(this._frame);
    }
    this._curves.dispose();
    this._hparams.dispose();
    this._compare.dispose();
    super.dispose();
  }
}

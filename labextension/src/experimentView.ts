/**
 * The experiment view (a main-area tab): header with state and actions, then sections for
 * trials, learning curves, hyperparameters, logs, checkpoints and the config.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { DeterminedClient, EventHub, describeError } from './api';
import { Chart } from './chart';
import { checkpointsTable, configView } from './checkpointsSection';
import { CompareSection } from './compareView';
import { errorBox, h, replaceChildren, select } from './dom';
import { ACTION_TEXT, headerContent } from './experimentHeader';
import { alignSeries, metricNames } from './series';
import { ExperimentAction, isTerminal, runCounts } from './states';
import { bestTrialId, defaultPlottedTrials } from './trialTable';
import { HparamsSection } from './hparamsView';
import { LogsSection } from './logsSection';
import { ExperimentDataModel, ViewPart } from './model';
import { onThemeChange } from './theme';
import { trialsTable } from './trialsView';
import type { EventType } from './types';

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

/** How many trials the curves show until the user picks. */
const DEFAULT_SELECTED_TRIALS = 8;

/** How many trials "select all" takes (curves of more are a blur, and each one is fetched). */
const MAX_SELECTED_TRIALS = 50;

/** Reports per trial and group a chart loads at first (downsampled by the server). */
const CURVE_POINTS = 1000;

export class ExperimentView extends Widget {
  readonly model: ExperimentDataModel;
  private _section: Section = 'trials';
  private _sectionNodes = new Map<Section, HTMLElement>();
  private _tabButtons = new Map<Section, HTMLButtonElement>();
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
  private _selected = new Set<number>();
  private _userSelected = false;
  /** Trials whose curves were fetched (later fetches ask only what is newer). */
  private _curvesLoaded = new Set<number>();

  // curves
  private _trainingChart = new Chart('line', 'steps', 'training');
  private _validationChart = new Chart('line', 'steps', 'validation');
  private _trainingMetric = '';
  private _validationMetric = '';
  private _hparams = new HparamsSection(id => this._toggleTrial(id));
  private _compare = new CompareSection();

  private _logs: LogsSection;

  constructor(
    readonly experimentId: number,
    private readonly _client: DeterminedClient,
    private readonly _hub: EventHub
  ) {
    super();
    this.model = new ExperimentDataModel(experimentId);
    this._logs = new LogsSection(_client, _hub, () => this._queue('logs'));
    this.id = `jupyter-determined-experiment-${experimentId}`;
    this.addClass('jp-Det-experimentView');
    this.node.dataset.experimentId = String(experimentId);
    this.title.label = `Experiment ${experimentId}`;
    this.title.closable = true;

    this._header = h('div', { class: 'jp-Det-expHeader' }, `Loading experiment ${experimentId}…`);
    this._message = h('div', { class: 'jp-Det-message' });
    const tabs = h('div', { class: 'jp-Det-tabs', attrs: { role: 'tablist' } });
    const sections = h('div', { class: 'jp-Det-sections' });
    for (const [section, label] of SECTIONS) {
      const button = h(
        'button',
        {
          class: 'jp-Det-tab',
          attrs: { role: 'tab', 'data-section': section },
          on: { click: () => this.showSection(section) }
        },
        label
      );
      this._tabButtons.set(section, button);
      tabs.appendChild(button);
      const node = h('div', {
        class: `jp-Det-section jp-Det-section-${section}`,
        attrs: { 'data-section': section }
      });
      this._sectionNodes.set(section, node);
      if (section === 'hparams') {
        node.appendChild(this._hparams.node);
      } else if (section === 'compare') {
        node.appendChild(this._compare.node);
      } else if (section === 'logs') {
        node.appendChild(this._logs.node);
      }
      sections.appendChild(node);
    }
    this.node.append(this._header, this._message, tabs, sections);
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
        this._selectDefaultTrials();
        const [, checkpoints] = await Promise.all([
          this._loadCurves(),
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
          errorBox(`Cannot load experiment ${this.experimentId}: ${describeError(error)}`)
        );
      } finally {
        this._refreshing = null;
      }
    })();
    return this._refreshing;
  }

  /**
   * Fetch the metrics of the plotted trials only, downsampled: a large experiment has far more
   * reports than a chart shows. A trial's first fetch starts at the beginning; later ones ask
   * what is newer than everything seen (events bring the rest while the stream is live).
   * `freshOnly`: fetch only trials never fetched (after the selection grew).
   */
  private async _loadCurves(freshOnly = false): Promise<void> {
    const selected = this._selectedTrialIds();
    const fresh = selected.filter(id => !this._curvesLoaded.has(id));
    const loaded = freshOnly ? [] : selected.filter(id => this._curvesLoaded.has(id));
    if (!fresh.length && !loaded.length) {
      return;
    }
    // Marked before the answer: a second call meanwhile must not fetch them again.
    fresh.forEach(id => this._curvesLoaded.add(id));
    try {
      const answers = await Promise.all([
        this._client.experimentMetrics(this.experimentId, '', 0, {
          trialIds: fresh,
          maxDatapoints: CURVE_POINTS
        }),
        this._client.experimentMetrics(this.experimentId, '', this.model.lastMetricId, {
          trialIds: loaded,
          maxDatapoints: CURVE_POINTS
        })
      ]);
      this.model.addMetrics(answers.flat());
    } catch (error) {
      fresh.forEach(id => this._curvesLoaded.delete(id));
      throw error;
    }
  }

  /** Fetch the curves of trials that just joined the selection (errors shown, not thrown). */
  private _loadNewCurves(): void {
    this._loadCurves(true).catch(error =>
      replaceChildren(
        this._message,
        errorBox(`Cannot load the learning curves: ${describeError(error)}`)
      )
    );
  }

  /**
   * Until the user picks, plot all trials of a small search and the best ones of a large one
   * (the best trial is always among them). Returns whether the selection changed.
   */
  private _selectDefaultTrials(): boolean {
    if (this._userSelected) {
      return false;
    }
    const experiment = this.model.experiment;
    const wanted = defaultPlottedTrials(
      this.model.trials.values(),
      this._metric(),
      experiment?.searcher?.smaller_is_better !== false,
      DEFAULT_SELECTED_TRIALS
    );
    if (wanted.length === this._selected.size && wanted.every(id => this._selected.has(id))) {
      return false;
    }
    this._selected = new Set(wanted);
    return true;
  }

  /** Add or remove one trial from the selection (the curves and the comparison). */
  private _toggleTrial(trialId: number, on = !this._selected.has(trialId)): void {
    this._userSelected = true;
    if (on) {
      this._selected.add(trialId);
      this._loadNewCurves();
    } else {
      this._selected.delete(trialId);
    }
    this._queue('trials');
    this._queue('metrics');
  }

  /** Replace the selection (the Trials toolbar's buttons). */
  private _setSelection(ids: number[]): void {
    this._userSelected = true;
    this._selected = new Set(ids.slice(0, MAX_SELECTED_TRIALS));
    this._loadNewCurves();
    this._queue('trials');
    this._queue('metrics');
  }

  private _onEvent(type: EventType, payload: unknown): void {
    this.model.applyEvent(type, payload);
  }

  showSection(section: Section): void {
    this._section = section;
    for (const [name, node] of this._sectionNodes) {
      node.hidden = name !== section;
      this._tabButtons.get(name)?.classList.toggle('jp-mod-current', name === section);
      this._tabButtons.get(name)?.setAttribute('aria-selected', String(name === section));
    }
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
    if (trialsChanged && this._selectDefaultTrials()) {
      this._loadNewCurves();
    }
    if (trialsChanged) {
      this._renderHeader();
    }
    if (parts.has('experiment')) {
      this._renderConfig();
    }
    if (trialsChanged) {
      if (this._section === 'trials') {
        this._renderTrials();
      }
      if (this._section === 'hparams') {
        this._renderHparams();
      }
      if (this._section === 'logs') {
        this._logs.renderControls([...this.model.trials.keys()].sort((a, b) => a - b));
      }
    }
    if ((parts.has('metrics') || trialsChanged) && this._section === 'curves') {
      this._renderCurves();
    }
    if ((parts.has('metrics') || trialsChanged) && this._section === 'compare') {
      this._renderCompare();
    }
    if (parts.has('checkpoints') && this._section === 'checkpoints') {
      this._renderCheckpoints();
    }
    if (parts.has('logs') && this._section === 'logs') {
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
    this.title.label = `${experiment.id}: ${experiment.name || 'experiment'}`;
    this.title.caption = `Determined experiment ${experiment.id} (${experiment.state})`;
    replaceChildren(
      this._header,
      ...headerContent(experiment, counts, action => void this.runAction(action))
    );
  }

  /** Confirm, run one action, and show the outcome (the state arrives by event or refresh). */
  async runAction(action: ExperimentAction): Promise<void> {
    const experiment = this.model.experiment;
    const name = experiment
      ? `experiment ${experiment.id} (${experiment.name})`
      : `experiment ${this.experimentId}`;
    const text = ACTION_TEXT[action];
    // Only what cannot be undone asks first: Pause and Activate undo each other, Kill does not.
    if (text.danger) {
      const result = await showDialog({
        title: `${text.label} ${name}`,
        body: text.confirm,
        buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: text.label })]
      });
      if (!result.button.accept) {
        return;
      }
    }
    try {
      const updated = await this._client.experimentAction(this.experimentId, action);
      this.model.setExperiment(updated);
      replaceChildren(this._message);
    } catch (error) {
      replaceChildren(this._message, errorBox(`${text.label} failed: ${describeError(error)}`));
    }
  }

  private _metric(): string {
    return this.model.experiment?.searcher?.metric ?? 'loss';
  }

  private _smallerIsBetter(): boolean {
    return this.model.experiment?.searcher?.smaller_is_better !== false;
  }

  private _bestTrialId(): number | null {
    return bestTrialId(this.model.trials.values(), this._metric(), this._smallerIsBetter());
  }

  private _renderTrials(): void {
    const node = this._sectionNodes.get('trials')!;
    const trials = [...this.model.trials.values()];
    if (!trials.length) {
      replaceChildren(
        node,
        h(
          'div',
          { class: 'jp-Det-empty' },
          'No trials yet: the searcher creates them once the experiment is scheduled.'
        )
      );
      return;
    }
    replaceChildren(
      node,
      ...trialsTable({
        trials,
        metric: this._metric(),
        smallerIsBetter: this._smallerIsBetter(),
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
        onCompare: () => this.showSection('compare')
      })
    );
  }

  private _selectedTrialIds(): number[] {
    return [...this._selected].filter(id => this.model.trials.has(id)).sort((a, b) => a - b);
  }

  private _renderCurves(): void {
    const node = this._sectionNodes.get('curves')!;
    const trialIds = this._selectedTrialIds();
    const best = this._bestTrialId();
    const experiment = this.model.experiment;
    const finished = !!experiment && isTerminal(experiment.state);
    const parts: HTMLElement[] = [];
    for (const [group, chart] of [
      ['training', this._trainingChart],
      ['validation', this._validationChart]
    ] as [string, Chart][]) {
      const reports = this.model.metricsOf(group);
      const names = metricNames([...reports.values()].flat());
      let metric = group === 'training' ? this._trainingMetric : this._validationMetric;
      if (!names.includes(metric)) {
        metric = names.includes(this._metric())
          ? this._metric()
          : names.includes('loss')
            ? 'loss'
            : (names[0] ?? '');
        if (group === 'training') {
          this._trainingMetric = metric;
        } else {
          this._validationMetric = metric;
        }
      }
      const picker = names.length
        ? select(
            names.map(n => [n, n] as [string, string]),
            metric,
            value => {
              if (group === 'training') {
                this._trainingMetric = value;
              } else {
                this._validationMetric = value;
              }
              this._renderCurves();
            },
            `jp-Det-select jp-Det-metricSelect-${group}`
          )
        : null;
      chart.yLabel = metric ? `${group} ${metric}` : group;
      chart.node.dataset.group = group;
      chart.emptyText = !trialIds.length
        ? 'No trial selected.'
        : finished
          ? `The selected trials reported no ${group} metrics.`
          : `Waiting for the first ${group} metrics…`;
      const data = alignSeries(reports, trialIds, metric);
      chart.update({
        ...data,
        labels: trialIds.map(id => `trial ${id}`),
        colorKeys: trialIds,
        // "Best" of one trial says nothing.
        highlight: best === null || trialIds.length < 2 ? -1 : trialIds.indexOf(best)
      });
      parts.push(
        h(
          'div',
          { class: 'jp-Det-chartBlock' },
          h('div', { class: 'jp-Det-chartTitle' }, `${group} `, picker),
          chart.node
        )
      );
    }
    const total = this.model.trials.size;
    const hint = !trialIds.length
      ? h('div', { class: 'jp-Det-empty' }, 'Select trials in the Trials tab to plot them.')
      : trialIds.length < total
        ? h(
            'div',
            { class: 'jp-Det-hint' },
            `Showing ${trialIds.length} of ${total} trials${this._userSelected ? '' : ' (the best ones)'}; pick others in the Trials tab.`
          )
        : null;
    // Keep chart nodes attached (uPlot redraws in place); rebuild only the surroundings.
    replaceChildren(node, hint, ...parts);
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
      this._sectionNodes.get('checkpoints')!,
      checkpointsTable(this.model.checkpoints.values(), this._metric())
    );
  }

  private _renderConfig(): void {
    replaceChildren(this._sectionNodes.get('config')!, configView(this.model.experiment?.config));
  }

  /** Open the Logs section on one trial (the notebook widget's error banner links here). */
  showTrialLogs(trialId: number): void {
    this.showSection('logs');
    void this._logs.selectTrial(trialId);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._unsubscribe?.();
    this._logs.dispose();
    this._disconnectTheme();
    if (this._frame) {
      cancelAnimationFrame(this._frame);
    }
    this._trainingChart.dispose();
    this._validationChart.dispose();
    this._hparams.dispose();
    this._compare.dispose();
    super.dispose();
  }
}

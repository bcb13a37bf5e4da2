/**
 * The left sidebar panel "Determined": the experiment list (live), its filters, the model
 * registry (`modelsSection.ts`), and the cluster strip.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  DeterminedClient,
  MASTER_STOPPING_NOTE,
  describeError,
  isMasterStopping
} from '../api/client';
import { EventHub, FeedMode } from '../api/events';
import { ClusterStrip } from './cluster';
import { kernelBadge, progressText, stateBadge, stateProgressBar } from './badges';
import { errorBox, h, noteBox, replaceChildren, select } from '../dom';
import { formatMetric, formatStartTime } from '../model/format';
import { IExperimentFilter, filterExperiments } from '../model/states';
import { ExperimentListModel } from '../model/model';
import { ModelsSection } from './modelsSection';
import { oncePerFrame, singleFlight } from '../model/schedule';
import type { IExperiment, ITrial } from '../api/types';

export const SIDEBAR_ID = 'jupyter-determined-sidebar';

const STATES = [
  'ACTIVE',
  'PAUSED',
  'STOPPING_CANCELED',
  'STOPPING_COMPLETED',
  'STOPPING_ERROR',
  'COMPLETED',
  'CANCELED',
  'ERROR'
];

export { stateBadge };

/** What the list says when the master has no experiment: what to do to get one. */
export const EMPTY_LIST_TEXT = 'No experiments yet.';
export const EMPTY_LIST_HINT =
  'Submit one with `det experiment create config.yaml .` in a terminal, %%det_submit in a notebook, or the notebook toolbar’s “Submit to Determined” button.';

/** One row of the list; rebuilt only when its experiment object changes. */
function experimentRow(experiment: IExperiment, open: (id: number) => void): HTMLElement {
  const metric = experiment.searcher?.metric ?? 'metric';
  const best = experiment.best_validation;
  return h(
    'li',
    {
      class: 'jp-Det-expRow',
      title: `Open experiment ${experiment.id}`,
      attrs: {
        'data-experiment-id': String(experiment.id),
        'data-state': experiment.state,
        tabindex: '0'
      },
      on: {
        click: () => open(experiment.id),
        keydown: (event: KeyboardEvent) => {
          if (event.key === 'Enter') {
            open(experiment.id);
          }
        }
      }
    },
    h(
      'div',
      { class: 'jp-Det-expRow-head' },
      h('span', { class: 'jp-Det-expId' }, `#${experiment.id}`),
      h('span', { class: 'jp-Det-expName' }, experiment.name || '(unnamed)'),
      kernelBadge(experiment),
      stateBadge(experiment.state)
    ),
    h(
      'div',
      { class: 'jp-Det-expRow-progress' },
      stateProgressBar(experiment.state, experiment.progress),
      progressText(experiment.state, experiment.progress, 'jp-Det-expPercent')
    ),
    h(
      'div',
      { class: 'jp-Det-expRow-meta' },
      h(
        'span',
        { class: 'jp-Det-expBest', title: `best ${metric}` },
        `best ${metric}: ${formatMetric(best)}`
      ),
      h(
        'span',
        { class: 'jp-Det-expTrials' },
        `${experiment.num_trials} trial${experiment.num_trials === 1 ? '' : 's'}`
      ),
      h(
        'span',
        { class: 'jp-Det-expStart', title: experiment.start_time },
        formatStartTime(experiment.start_time)
      )
    )
  );
}

export class DeterminedSidebar extends Widget {
  readonly model = new ExperimentListModel();
  private _filter: IExperimentFilter = { state: '', name: '', showArchived: false };
  private _list: HTMLUListElement;
  private _status: HTMLElement;
  private _message: HTMLElement;
  private _feedBadge: HTMLElement;
  private _rows = new Map<number, { experiment: IExperiment; node: HTMLElement }>();
  private _unsubscribe: (() => void) | null = null;
  private _cluster: ClusterStrip;
  readonly models: ModelsSection;

  constructor(
    private readonly _client: DeterminedClient,
    private readonly _hub: EventHub,
    private readonly _open: (id: number) => void
  ) {
    super();
    this.id = SIDEBAR_ID;
    this.addClass('jp-Det-sidebar');
    this.title.caption = 'Determined experiments';

    this._feedBadge = h(
      'span',
      { class: 'jp-Det-feed', attrs: { 'data-mode': 'connecting' } },
      'connecting'
    );
    const header = h(
      'div',
      { class: 'jp-Det-sidebar-header' },
      h('h2', { class: 'jp-Det-title' }, 'Determined'),
      this._feedBadge,
      h(
        'button',
        {
          class: 'jp-Det-button jp-Det-refresh',
          title: 'Reload the experiment list',
          on: { click: () => void this.refresh() }
        },
        'Refresh'
      )
    );
    const stateSelect = select(
      [['', 'All states'], ...STATES.map(s => [s, s] as [string, string])],
      '',
      value => this._setFilter({ state: value }),
      'jp-Det-select jp-Det-stateFilter'
    );
    const nameInput = h('input', {
      class: 'jp-Det-input jp-Det-nameFilter',
      props: { type: 'search', placeholder: 'Filter by name or id' },
      on: { input: () => this._setFilter({ name: nameInput.value }) }
    });
    const archived = h('input', {
      class: 'jp-Det-archivedFilter',
      props: { type: 'checkbox' },
      on: { change: () => this._setFilter({ showArchived: archived.checked }) }
    });
    const filters = h(
      'div',
      { class: 'jp-Det-filters' },
      stateSelect,
      nameInput,
      h('label', { class: 'jp-Det-checkbox' }, archived, 'archived')
    );
    this._message = h('div', { class: 'jp-Det-message' });
    this._status = h('div', { class: 'jp-Det-listStatus' }, 'Loading experiments…');
    this._list = h('ul', { class: 'jp-Det-expList' });
    this._cluster = new ClusterStrip(_client);
    this.models = new ModelsSection(_client, _hub, _open);
    const body = h(
      'div',
      { class: 'jp-Det-sidebar-body' },
      filters,
      this._message,
      this._status,
      this._list
    );
    this.node.append(header, body, this.models.node, this._cluster.node);

    this.model.changed.connect(() => this._queueRender());
    this._hub.modeChanged.add(mode => this._showFeedMode(mode));
  }

  protected override onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this.start();
  }

  /** Start listening and load the list (idempotent). */
  start(): Promise<void> {
    if (!this._unsubscribe) {
      this._unsubscribe = this._hub.subscribe({
        types: ['experiment', 'trial'],
        onEvent: (type, payload) => {
          if (type === 'experiment') {
            this.model.applyEvent(payload as IExperiment);
          } else {
            this.model.applyTrial(payload as ITrial);
            this._cluster.refreshSoon();
          }
        },
        onPoll: () => {
          void this.refresh();
          this._cluster.refreshSoon();
        }
      });
      this._cluster.start();
      void this.models.start();
    }
    return this.refresh();
  }

  /** Reload the experiment list (a call while one loads waits for that one). */
  readonly refresh = singleFlight(async () => {
    try {
      this.model.replaceAll(await this._client.listExperiments());
      replaceChildren(this._message);
      // The status line changes from "Loading…" even when the answer changed nothing
      // (an empty master answers an empty list).
      this._queueRender();
    } catch (error) {
      replaceChildren(
        this._message,
        isMasterStopping(error)
          ? noteBox(MASTER_STOPPING_NOTE)
          : errorBox(`Cannot load experiments: ${describeError(error)}`)
      );
      this._status.textContent = '';
    }
  });

  private _setFilter(change: Partial<IExperimentFilter>): void {
    this._filter = { ...this._filter, ...change };
    this._queueRender();
  }

  private _showFeedMode(mode: FeedMode): void {
    this._feedBadge.dataset.mode = mode;
    this._feedBadge.textContent =
      mode === 'live' ? '● live' : mode === 'polling' ? 'polling' : 'connecting';
    this._feedBadge.title =
      mode === 'polling'
        ? 'The live event stream is unavailable; refreshing every few seconds.'
        : mode === 'live'
          ? 'Receiving live updates from the master.'
          : 'Connecting to the live event stream…';
  }

  /** Renders at most once per animation frame, however many events arrive. */
  private readonly _queueRender = oncePerFrame(() => this.render());

  /** Render the list now (rows are reused when their experiment did not change). */
  render(): void {
    const visible = filterExperiments(this.model.experiments, this._filter);
    const total = this.model.size;
    if (!this.model.loaded) {
      // still "Loading experiments…" (or the error of the first load)
    } else if (total === 0) {
      replaceChildren(
        this._status,
        h('div', { class: 'jp-Det-emptyTitle' }, EMPTY_LIST_TEXT),
        h('div', { class: 'jp-Det-hint' }, EMPTY_LIST_HINT)
      );
    } else {
      this._status.textContent =
        visible.length === total
          ? `${total} experiment${total === 1 ? '' : 's'}`
          : `${visible.length} of ${total} experiments`;
    }
    this._status.dataset.empty = String(this.model.loaded && total === 0);
    const keep = new Set<number>();
    const fragment = document.createDocumentFragment();
    for (const experiment of visible) {
      keep.add(experiment.id);
      let row = this._rows.get(experiment.id);
      if (!row || row.experiment !== experiment) {
        row = { experiment, node: experimentRow(experiment, this._open) };
        this._rows.set(experiment.id, row);
      }
      fragment.appendChild(row.node);
    }
    for (const id of [...this._rows.keys()]) {
      if (!keep.has(id)) {
        this._rows.delete(id);
      }
    }
    // The fragment holds every visible row in order (reused nodes moved in): swap in one go.
    replaceChildren(this._list, fragment);
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._unsubscribe?.();
    this.models.dispose();
    this._cluster.dispose();
    super.dispose();
  }
}

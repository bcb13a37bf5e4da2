/**
 * The left sidebar panel "Determined": the experiment table (live; `experimentTable.ts`), its
 * filters, bulk actions and editor, the job queue (`queueSection.ts`), the model registry
 * (`modelsSection.ts`), and the cluster strip.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
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
import { stateBadge } from './badges';
import { errorBox, h, noteBox, replaceChildren, select } from '../dom';
import {
  BulkAction,
  ITableFilter,
  NO_TABLE_FILTER,
  bulkAllowed,
  bulkSummary,
  bulkTargets,
  hasOwners,
  tableRows
} from '../model/experimentTable';
import { ExperimentListModel } from '../model/model';
import { ExperimentEditor } from './experimentEditor';
import { ExperimentTable, IOpenOptions } from './experimentTable';
import { ModelsSection } from './modelsSection';
import { QueueSection } from './queueSection';
import { PlaceFilters } from './placeFilters';
import { oncePerFrame, singleFlight } from '../model/schedule';
import type { IExperiment, INotebookOrigin, ITrial } from '../api/types';
import { MAX_COMPARED } from './experimentCompare';

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

/** The table's bulk actions, in the order of their buttons; those that cannot be undone ask. */
const BULK_ACTIONS: { action: BulkAction; label: string; confirm?: string }[] = [
  { action: 'pause', label: 'Pause' },
  { action: 'activate', label: 'Activate' },
  {
    action: 'kill',
    label: 'Kill',
    confirm: 'Their running trials stop now; a killed experiment cannot be resumed.'
  },
  { action: 'archive', label: 'Archive' },
  { action: 'unarchive', label: 'Unarchive' },
  {
    action: 'delete',
    label: 'Delete',
    confirm:
      'Their trials, metrics, logs and checkpoints (files included) are deleted; this cannot be undone.'
  }
];

export class DeterminedSidebar extends Widget {
  readonly model = new ExperimentListModel();
  private _filter: ITableFilter = NO_TABLE_FILTER;
  private _table: ExperimentTable;
  private _editor: ExperimentEditor;
  private _bulkBar: HTMLElement;
  private _bulkCount: HTMLElement;
  private _bulkButtons = new Map<BulkAction, HTMLButtonElement>();
  private _compareButton: HTMLButtonElement;
  private _busy = false;
  private _status: HTMLElement;
  private _message: HTMLElement;
  private _feedBadge: HTMLElement;
  private _unsubscribe: (() => void) | null = null;
  private _cluster: ClusterStrip;
  private _places = new PlaceFilters(place => this._setFilter(place));
  readonly models: ModelsSection;
  readonly queue: QueueSection;

  constructor(
    private readonly _client: DeterminedClient,
    private readonly _hub: EventHub,
    private readonly _open: (id: number, options?: IOpenOptions) => void,
    /** "Use" on a model version (notebookInsert.ts); none: no such buttons. */
    useInNotebook?: (uuid: string, origin?: INotebookOrigin | null) => Promise<void>,
    /** Compare the selected experiments (experimentCompare.ts); none: no Compare button. */
    private readonly _compare?: (ids: number[]) => void
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
          title: 'Reload the experiment list and the queue',
          on: {
            click: () => {
              void this.refresh();
              void this.queue.refresh();
            }
          }
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
      props: { type: 'search', placeholder: 'Filter: name, id, label:x' },
      title: 'Words that must all match a name, label, note or id; label:x matches labels only',
      on: { input: () => this._setFilter({ text: nameInput.value }) }
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
      ...this._places.nodes,
      nameInput,
      h('label', { class: 'jp-Det-checkbox' }, archived, 'archived')
    );
    this._message = h('div', { class: 'jp-Det-message' });
    this._status = h('div', { class: 'jp-Det-listStatus' }, 'Loading experiments…');
    this._table = new ExperimentTable({
      open: (id, options) => this._open(id, options),
      edit: id => this._edit(id),
      changed: () => this._queueRender(),
      sorted: () => this.render()
    });
    this._editor = new ExperimentEditor(_client, updated => this.model.upsert(updated));
    this._bulkCount = h('span', { class: 'jp-Det-bulkCount' });
    const bulkButtons = BULK_ACTIONS.map(({ action, label }) => {
      const button = h(
        'button',
        {
          class: `jp-Det-button jp-Det-bulk-${action}`,
          attrs: { 'data-action': action },
          on: { click: () => void this._bulk(action) }
        },
        label
      );
      this._bulkButtons.set(action, button);
      return button;
    });
    const clear = h(
      'button',
      {
        class: 'jp-Det-button jp-Det-bulkClear',
        title: 'Unselect all',
        on: {
          click: () => {
            this._table.selected.clear();
            this._queueRender();
          }
        }
      },
      '✕'
    );
    this._compareButton = h(
      'button',
      {
        class: 'jp-Det-button jp-Det-bulk-compare',
        on: { click: () => this._compare?.(this._selection().map(e => e.id)) }
      },
      'Compare'
    );
    this._bulkBar = h(
      'div',
      { class: 'jp-Det-bulkBar', attrs: { hidden: '' } },
      this._bulkCount,
      ...bulkButtons,
      this._compare ? this._compareButton : null,
      clear
    );
    this._cluster = new ClusterStrip(_client);
    this.queue = new QueueSection(_client, _hub, id => this._open(id));
    this.models = new ModelsSection(_client, _hub, _open, useInNotebook);
    const body = h(
      'div',
      { class: 'jp-Det-sidebar-body' },
      filters,
      this._bulkBar,
      this._editor.node,
      this._message,
      this._status,
      this._table.node
    );
    this.node.append(header, body, this.queue.node, this.models.node, this._cluster.node);

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
      void this.queue.start();
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

  private _setFilter(change: Partial<ITableFilter>): void {
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

  /** Render the table now (rows are reused when their experiment did not change). */
  render(): void {
    const all = [...this.model.experiments];
    this._places.update(all);
    const visible = tableRows(all, this._filter, this._table.sort);
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
    // A selection is what the user sees selected: rows filtered out (or gone) leave it, so a
    // bulk action never touches an experiment that is not on screen.
    const shown = new Set(visible.map(e => e.id));
    this._table.pruneSelection(id => shown.has(id));
    this._table.render(visible, hasOwners(all));
    this._renderBulkBar();
  }

  /** The selected experiments that still exist. */
  private _selection(): IExperiment[] {
    const selected: IExperiment[] = [];
    for (const id of this._table.selected) {
      const experiment = this.model.get(id);
      if (experiment) {
        selected.push(experiment);
      }
    }
    return selected;
  }

  private _renderBulkBar(): void {
    const selection = this._selection();
    this._bulkBar.hidden = selection.length === 0;
    this._bulkCount.textContent = `${selection.length} selected`;
    const n = selection.length;
    this._compareButton.disabled = n < 2 || n > MAX_COMPARED;
    this._compareButton.title =
      n < 2
        ? 'Select two or more experiments to compare them'
        : n > MAX_COMPARED
          ? `Compare at most ${MAX_COMPARED} experiments at once`
          : `Compare the best trials of the ${n} selected experiments side by side`;
    for (const [action, button] of this._bulkButtons) {
      const count = selection.filter(e => bulkAllowed(e, action)).length;
      button.disabled = this._busy || count === 0;
      button.title = count
        ? `${action} ${count} of the ${selection.length} selected`
        : `None of the selected experiments can ${action} now`;
    }
  }

  private _edit(id: number): void {
    const experiment = this.model.get(id);
    if (experiment) {
      this._editor.open(experiment);
    }
  }

  /** Apply a bulk action to the selected experiments that allow it (asking first if it cannot be undone). */
  private async _bulk(action: BulkAction): Promise<void> {
    const { apply, skip } = bulkTargets(this._selection(), action);
    const spec = BULK_ACTIONS.find(entry => entry.action === action);
    if (!apply.length || !spec) {
      return;
    }
    if (spec.confirm) {
      const ids = apply.map(e => e.id);
      const listed = ids.length > 8 ? `${ids.slice(0, 8).join(', ')}, …` : ids.join(', ');
      const result = await showDialog({
        title: `${spec.label} ${apply.length} experiment${apply.length === 1 ? '' : 's'}?`,
        body: `Experiments ${listed}. ${spec.confirm}`,
        buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: spec.label })]
      });
      if (!result.button.accept) {
        return;
      }
    }
    this._busy = true;
    this._renderBulkBar();
    const failed: { id: number; message: string }[] = [];
    let done = 0;
    // One request at a time: the master's store is one SQLite file, and a thousand parallel
    // requests would only queue there (and hide which one failed).
    for (const experiment of apply) {
      try {
        if (action === 'delete') {
          await this._client.deleteExperiment(experiment.id);
          this.model.applyEvent({ ...experiment, deleted: true });
          this._table.selected.delete(experiment.id);
        } else {
          this.model.upsert(await this._client.experimentAction(experiment.id, action));
        }
        done += 1;
      } catch (error) {
        failed.push({ id: experiment.id, message: describeError(error) });
      }
    }
    this._busy = false;
    const summary = bulkSummary(action, done, skip.length, failed);
    replaceChildren(
      this._message,
      failed.length
        ? errorBox(summary)
        : h('div', { class: 'jp-Det-info', attrs: { role: 'status' } }, summary)
    );
    this._queueRender();
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._unsubscribe?.();
    this.models.dispose();
    this.queue.dispose();
    this._cluster.dispose();
    super.dispose();
  }
}

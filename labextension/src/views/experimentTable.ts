/**
 * The sidebar's experiment table: one compact row per experiment (id, name with its progress,
 * state, owner when the master names one, best metric, duration, labels), sortable by any
 * column, with a checkbox per row for the bulk actions.
 *
 * Built for a thousand rows: a row is plain text cells, built once per experiment object and
 * reused while that object is unchanged (a sort or a filter only moves existing nodes), and
 * every row's events go through one listener on the table body.
 */
import { h, replaceChildren } from '../dom';
import { kernelBadge, stateBadge, stateProgressBar } from './badges';
import { formatDuration, formatMetric, formatStartTime } from '../model/format';
import { listDisplayState } from '../model/states';
import {
  DEFAULT_SORT,
  ISort,
  SortKey,
  durationSeconds,
  experimentOwner,
  labelsOf,
  nextSort
} from '../model/experimentTable';
import type { IExperiment } from '../api/types';

export interface IOpenOptions {
  /** Open a tab of its own instead of reusing the experiment tab. */
  newTab?: boolean;
}

export interface IExperimentTableCallbacks {
  open: (id: number, options?: IOpenOptions) => void;
  edit: (id: number) => void;
  /** The selection changed (the sidebar re-renders and updates its bulk bar). */
  changed: () => void;
  /** The sort changed: the sidebar re-renders now (not on the next frame: the click's answer). */
  sorted: () => void;
}

interface IColumn {
  key: SortKey;
  label: string;
  title: string;
  className: string;
}

const COLUMNS: IColumn[] = [
  { key: 'id', label: 'ID', title: 'Sort by id (newest first)', className: 'jp-Det-col-id' },
  { key: 'name', label: 'Name', title: 'Sort by name', className: 'jp-Det-col-name' },
  { key: 'state', label: 'State', title: 'Sort by state', className: 'jp-Det-col-state' },
  { key: 'owner', label: 'User', title: 'Sort by user', className: 'jp-Det-col-owner' },
  {
    key: 'best',
    label: 'Best',
    title: 'Sort by best validation metric (experiments without one last)',
    className: 'jp-Det-col-best'
  },
  {
    key: 'duration',
    label: 'Duration',
    title: 'Sort by duration',
    className: 'jp-Det-col-duration'
  },
  { key: 'labels', label: 'Labels', title: 'Sort by labels', className: 'jp-Det-col-labels' }
];

interface IRow {
  experiment: IExperiment;
  withOwner: boolean;
  node: HTMLTableRowElement;
  checkbox: HTMLInputElement;
}

/**
 * The row buttons, shown over the end of the name on hover (no column of their own). One set
 * for the whole table, moved into the row under the pointer or focus: a thousand rows do not
 * each carry three more elements to style and lay out.
 */
function rowActions(): HTMLElement {
  return h(
    'span',
    { class: 'jp-Det-rowActions' },
    h(
      'button',
      {
        class: 'jp-Det-iconButton jp-Det-rowEdit',
        title: 'Rename, notes and labels',
        attrs: { 'data-row-action': 'edit', 'aria-label': 'Rename, notes and labels' }
      },
      '✎'
    ),
    h(
      'button',
      {
        class: 'jp-Det-iconButton jp-Det-rowNewTab',
        title: 'Open in a new tab',
        attrs: { 'data-row-action': 'new-tab', 'aria-label': 'Open in a new tab' }
      },
      '↗'
    )
  );
}

/** The owner cell's tooltip: whose it is and where (the cell itself may be cut short). */
function ownerTitle(experiment: IExperiment): string {
  const place = [experiment.workspaceName, experiment.projectName].filter(Boolean).join(' / ');
  return `${experimentOwner(experiment)}'s experiment${place ? ` in ${place}` : ''}`;
}

/** Build one row (text only: names and labels are untrusted API data). */
function buildRow(experiment: IExperiment, withOwner: boolean): IRow {
  // PAUSING while the master says its paused trials still drain (`run_state` STOPPING).
  const shownState = listDisplayState(experiment);
  const metric = experiment.searcher?.metric ?? 'metric';
  const seconds = durationSeconds(experiment);
  const labels = labelsOf(experiment);
  const checkbox = h('input', {
    class: 'jp-Det-rowSelect',
    props: { type: 'checkbox' },
    attrs: { 'aria-label': `Select experiment ${experiment.id}` }
  });
  const notes = typeof experiment.notes === 'string' ? experiment.notes.trim() : '';
  const node = h(
    'tr',
    {
      class: 'jp-Det-expRow',
      title: `Open experiment ${experiment.id} (Ctrl/⌘-click: in a new tab)`,
      attrs: {
        'data-experiment-id': String(experiment.id),
        'data-state': shownState,
        tabindex: '0'
      }
    },
    h('td', { class: 'jp-Det-col-select' }, checkbox),
    h('td', { class: 'jp-Det-col-id jp-Det-expId' }, `#${experiment.id}`),
    h(
      'td',
      { class: 'jp-Det-col-name' },
      h(
        'div',
        { class: 'jp-Det-expNameLine' },
        h(
          'span',
          { class: 'jp-Det-expName', title: notes || experiment.name },
          experiment.name || '(unnamed)'
        ),
        notes ? h('span', { class: 'jp-Det-notesMark', title: notes }, '✎') : null,
        kernelBadge(experiment)
      ),
      h(
        'div',
        { class: 'jp-Det-expSubLine' },
        stateProgressBar(experiment.state, experiment.progress),
        // Shown only when the panel is too narrow for the State column (CSS container query).
        h('span', { class: 'jp-Det-narrowState' }, stateBadge(shownState)),
        // Likewise the owner, when the panel is too narrow for the User column.
        withOwner
          ? h(
              'span',
              { class: 'jp-Det-narrowOwner', title: ownerTitle(experiment) },
              experimentOwner(experiment)
            )
          : null
      )
    ),
    h('td', { class: 'jp-Det-col-state' }, stateBadge(shownState)),
    withOwner
      ? h(
          'td',
          { class: 'jp-Det-col-owner', title: ownerTitle(experiment) },
          experimentOwner(experiment)
        )
      : null,
    h(
      'td',
      {
        class: 'jp-Det-col-best jp-Det-expBest',
        title: `best ${metric}${experiment.searcher?.smaller_is_better === false ? ' (larger is better)' : ''}`
      },
      formatMetric(experiment.best_validation)
    ),
    h(
      'td',
      {
        class: 'jp-Det-col-duration jp-Det-expDuration',
        title: `started ${formatStartTime(experiment.start_time)}`
      },
      seconds === null ? '–' : formatDuration(seconds)
    ),
    h(
      'td',
      { class: 'jp-Det-col-labels jp-Det-expLabels', title: labels.join(', ') },
      ...labels.map(label => h('span', { class: 'jp-Det-label' }, label))
    )
  );
  return { experiment, withOwner, node, checkbox };
}

/** The table of experiments (its rows, its header's sort, its selection). */
export class ExperimentTable {
  readonly node: HTMLElement;
  sort: ISort = DEFAULT_SORT;
  /** Ids of the selected experiments (kept across filters and sorts, dropped when gone). */
  readonly selected = new Set<number>();
  private _table: HTMLTableElement;
  private _head: HTMLTableSectionElement;
  private _body: HTMLTableSectionElement;
  private _rows = new Map<number, IRow>();
  private _order: number[] = [];
  private _withOwner = false;
  private _lastClicked: number | null = null;
  private _selectAll: HTMLInputElement;
  private _actions = rowActions();

  constructor(private readonly _callbacks: IExperimentTableCallbacks) {
    this._selectAll = h('input', {
      class: 'jp-Det-selectAll',
      props: { type: 'checkbox' },
      attrs: { 'aria-label': 'Select all listed experiments' },
      on: { change: () => this._toggleAll(this._selectAll.checked) }
    });
    this._head = h('thead');
    this._body = h('tbody', {
      on: {
        click: event => this._onClick(event),
        mouseover: event => this._showActions(event),
        focusin: event => this._showActions(event),
        auxclick: event => this._onAuxClick(event),
        keydown: event => this._onKeydown(event)
      }
    });
    this._table = h('table', { class: 'jp-Det-expTable' }, this._head, this._body);
    this.node = h('div', { class: 'jp-Det-expList' }, this._table);
    this._renderHead();
  }

  /** Show these experiments in this order (rows are rebuilt only for changed experiments). */
  render(experiments: IExperiment[], withOwner: boolean): void {
    if (withOwner !== this._withOwner) {
      this._withOwner = withOwner;
      this._renderHead();
    }
    const keep = new Map<number, IRow>();
    const fragment = document.createDocumentFragment();
    for (const experiment of experiments) {
      let row = this._rows.get(experiment.id);
      if (!row || row.experiment !== experiment || row.withOwner !== withOwner) {
        row = buildRow(experiment, withOwner);
      }
      const selected = this.selected.has(experiment.id);
      row.checkbox.checked = selected;
      row.node.classList.toggle('jp-mod-selected', selected);
      keep.set(experiment.id, row);
      fragment.appendChild(row.node);
    }
    this._rows = keep;
    this._order = experiments.map(e => e.id);
    replaceChildren(this._body, fragment);
    this._syncSelectAll();
  }

  /** Forget the selected experiments for which `keep` is false. */
  pruneSelection(keep: (id: number) => boolean): void {
    for (const id of [...this.selected]) {
      if (!keep(id)) {
        this.selected.delete(id);
      }
    }
  }

  private _renderHead(): void {
    const cells = COLUMNS.filter(c => c.key !== 'owner' || this._withOwner).map(column => {
      const sorted = this.sort.key === column.key;
      const arrow = sorted ? (this.sort.direction === 'asc' ? ' ▲' : ' ▼') : '';
      return h(
        'th',
        {
          class: `${column.className} jp-Det-sortable`,
          title: column.title,
          attrs: {
            'data-sort': column.key,
            'aria-sort': sorted
              ? this.sort.direction === 'asc'
                ? 'ascending'
                : 'descending'
              : 'none',
            tabindex: '0'
          },
          on: {
            click: () => this._sortBy(column.key),
            keydown: (event: KeyboardEvent) => {
              if (event.key === 'Enter') {
                this._sortBy(column.key);
              }
            }
          }
        },
        column.label + arrow
      );
    });
    replaceChildren(
      this._head,
      h('tr', null, h('th', { class: 'jp-Det-col-select' }, this._selectAll), ...cells)
    );
  }

  private _sortBy(key: SortKey): void {
    this.sort = nextSort(this.sort, key);
    this._renderHead();
    this._callbacks.sorted();
  }

  /** Move the row buttons into the row under the pointer (or holding the focus). */
  private _showActions(event: Event): void {
    const row = (event.target as Element | null)?.closest?.('tr.jp-Det-expRow');
    const cell = row?.querySelector('.jp-Det-col-name');
    if (cell && this._actions.parentElement !== cell) {
      cell.appendChild(this._actions);
    }
  }

  private _rowId(target: EventTarget | null): number | null {
    const row = (target as Element | null)?.closest?.('tr.jp-Det-expRow') as HTMLElement | null;
    return row ? Number(row.dataset.experimentId) : null;
  }

  private _onClick(event: MouseEvent): void {
    const id = this._rowId(event.target);
    if (id === null) {
      return;
    }
    const target = event.target as HTMLElement;
    if (target.classList.contains('jp-Det-rowSelect')) {
      this._select(id, (target as HTMLInputElement).checked, event.shiftKey);
      return;
    }
    if (target.closest('.jp-Det-col-select')) {
      return; // a click beside the checkbox in its cell does not open the experiment
    }
    const action = target.closest('[data-row-action]')?.getAttribute('data-row-action');
    if (action === 'edit') {
      this._callbacks.edit(id);
    } else if (action === 'new-tab') {
      this._callbacks.open(id, { newTab: true });
    } else {
      this._callbacks.open(id, { newTab: event.ctrlKey || event.metaKey });
    }
  }

  private _onAuxClick(event: MouseEvent): void {
    const id = this._rowId(event.target);
    if (id !== null && event.button === 1) {
      event.preventDefault();
      this._callbacks.open(id, { newTab: true });
    }
  }

  private _onKeydown(event: KeyboardEvent): void {
    const id = this._rowId(event.target);
    if (id === null || (event.target as HTMLElement).tagName !== 'TR') {
      return;
    }
    if (event.key === 'Enter') {
      this._callbacks.open(id, { newTab: event.ctrlKey || event.metaKey });
    } else if (event.key === ' ') {
      event.preventDefault();
      this._select(id, !this.selected.has(id), event.shiftKey);
    }
  }

  /** Select or unselect a row; with Shift, every listed row since the last one clicked too. */
  private _select(id: number, on: boolean, range: boolean): void {
    const ids = [id];
    if (range && this._lastClicked !== null) {
      const from = this._order.indexOf(this._lastClicked);
      const to = this._order.indexOf(id);
      if (from >= 0 && to >= 0) {
        ids.push(...this._order.slice(Math.min(from, to), Math.max(from, to) + 1));
      }
    }
    for (const each of ids) {
      if (on) {
        this.selected.add(each);
      } else {
        this.selected.delete(each);
      }
    }
    this._lastClicked = id;
    this._callbacks.changed();
  }

  private _toggleAll(on: boolean): void {
    for (const id of this._order) {
      if (on) {
        this.selected.add(id);
      } else {
        this.selected.delete(id);
      }
    }
    this._callbacks.changed();
  }

  private _syncSelectAll(): void {
    const listed = this._order.filter(id => this.selected.has(id)).length;
    this._selectAll.checked = listed > 0 && listed === this._order.length;
    this._selectAll.indeterminate = listed > 0 && listed < this._order.length;
  }
}

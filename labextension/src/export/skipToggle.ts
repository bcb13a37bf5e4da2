/**
 * `det-skip` on notebook cells: each code cell gets a small toggle in its prompt column (one
 * click adds or removes the tag; always shown, as a badge, on cells that carry it) and the class
 * `jp-Det-skipped` while its metadata tags contain `det-skip`, kept in sync as tags change — from
 * the toggle, the property inspector, the command, or a collaborator.
 */
import type { Cell, ICellModel } from '@jupyterlab/cells';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { IDisposable } from '@lumino/disposable';

import { h } from '../dom';
import { SKIP_TAG, USES_DETERMINED, hasSkipTag, withSkipTag } from './exportPreviewModel';

export const SKIPPED_CLASS = 'jp-Det-skipped';
const TOGGLE_CLASS = 'jp-Det-skipToggle';
const USES_DETERMINED_CLASS = 'jp-Det-usesDetermined';

export function isSkipped(model: ICellModel): boolean {
  return hasSkipTag(model.getMetadata('tags'));
}

/** Add (`skip`), remove, or flip (undefined) the `det-skip` tag; returns the new state. */
export function setSkipped(model: ICellModel, skip?: boolean): boolean {
  const tags = model.getMetadata('tags');
  const next = skip ?? !hasSkipTag(tags);
  const updated = withSkipTag(tags, next);
  if (updated.length) {
    model.setMetadata('tags', updated);
  } else if (model.getMetadata('tags') !== undefined) {
    model.deleteMetadata('tags');
  }
  return next;
}

/**
 * Calls `changed` when the notebook's cells, their sources or their metadata change (cell
 * metadata changes do not reach the notebook model's `contentChanged`).
 */
export class NotebookWatcher implements IDisposable {
  private readonly _watched = new WeakSet<ICellModel>();
  private _disposed = false;

  constructor(
    private readonly _panel: NotebookPanel,
    private readonly _changed: () => void
  ) {
    const model = _panel.content.model;
    _panel.content.modelChanged.connect(this._onModel, this);
    if (model) {
      this._connect();
    }
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._panel.content.modelChanged.disconnect(this._onModel, this);
    const model = this._panel.content.model;
    if (model) {
      model.contentChanged.disconnect(this._emit, this);
      model.cells.changed.disconnect(this._onCells, this);
      for (let i = 0; i < model.cells.length; i++) {
        model.cells.get(i).metadataChanged.disconnect(this._emit, this);
      }
    }
  }

  private _onModel(): void {
    this._connect();
    this._emit();
  }

  private _connect(): void {
    const model = this._panel.content.model;
    if (!model) {
      return;
    }
    model.contentChanged.connect(this._emit, this);
    model.cells.changed.connect(this._onCells, this);
    this._watchCells();
  }

  private _onCells(): void {
    this._watchCells();
    this._emit();
  }

  private _watchCells(): void {
    const model = this._panel.content.model;
    for (let i = 0; model && i < model.cells.length; i++) {
      const cell = model.cells.get(i);
      if (!this._watched.has(cell)) {
        this._watched.add(cell);
        cell.metadataChanged.connect(this._emit, this);
      }
    }
  }

  private _emit(): void {
    if (!this._disposed) {
      this._changed();
    }
  }
}

/** The toggles and classes on one notebook's cells. */
export class SkipMarkers implements IDisposable {
  private readonly _watcher: NotebookWatcher;
  private _frame = 0;
  private _disposed = false;

  constructor(private readonly _panel: NotebookPanel) {
    // Cell widgets are created after the model's change signals: update on the next frame.
    this._watcher = new NotebookWatcher(_panel, () => this.schedule());
    this.schedule();
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    this._disposed = true;
    cancelAnimationFrame(this._frame);
    this._watcher.dispose();
  }

  schedule(): void {
    if (this._disposed || this._frame) {
      return;
    }
    this._frame = requestAnimationFrame(() => {
      this._frame = 0;
      this.update();
    });
  }

  /** Make every cell's toggle and class match its tags (idempotent). */
  update(): void {
    if (this._disposed) {
      return;
    }
    const notebook = this._panel.content;
    let relevant = false;
    for (const cell of notebook.widgets) {
      const model = cell.model;
      const skipped = model.type === 'code' && isSkipped(model);
      relevant ||= skipped || USES_DETERMINED.test(model.sharedModel.getSource());
      cell.toggleClass(SKIPPED_CLASS, skipped);
      const toggle = this._toggleOf(cell);
      if (toggle) {
        toggle.setAttribute('aria-pressed', String(skipped));
        toggle.textContent = skipped ? SKIP_TAG : 'skip';
        toggle.title = skipped
          ? `Left out of Determined experiments (tag ${SKIP_TAG}). Click to include this cell again.`
          : `Leave this cell out of Determined experiments (adds the tag ${SKIP_TAG}).`;
      }
    }
    // The toggles show on hover only in notebooks that use Determined (others see badges only).
    notebook.node.classList.toggle(USES_DETERMINED_CLASS, relevant);
  }

  /** The cell's toggle, created for code cells (and removed if the cell is no longer code). */
  private _toggleOf(cell: Cell): HTMLButtonElement | null {
    let toggle = cell.node.querySelector<HTMLButtonElement>(`:scope > .${TOGGLE_CLASS}`);
    if (cell.model.type !== 'code') {
      toggle?.remove();
      return null;
    }
    if (!toggle) {
      toggle = h('button', {
        class: TOGGLE_CLASS,
        attrs: { type: 'button', 'data-det-skip-toggle': '' },
        on: {
          click: event => {
            event.stopPropagation();
            setSkipped(cell.model);
          },
          // Not a click on the cell: no drag, no selection change.
          mousedown: event => event.stopPropagation()
        }
      });
      cell.addClass('jp-Det-skipHost');
      cell.node.appendChild(toggle);
    }
    return toggle;
  }
}

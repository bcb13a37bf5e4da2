/**
 * `NotebookSync` keeps the kernel's copy of the notebook current over the comm target
 * `jupyter_determined.notebook` (protocol in jupyter_determined/_export.py), so `%%det_submit`
 * exports the cells as the user sees them, unsaved edits and tags included.
 */
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';
import { IDisposable } from '@lumino/disposable';

import { USES_DETERMINED } from './exportPreviewModel';

import { NOTEBOOK_COMM_TARGET as COMM_TARGET } from '../api/contract.generated';

export { COMM_TARGET };

// Type aliases, not interfaces: they are JSON objects as they are (comm data is a JSONObject).
export type ICellSnapshot = {
  id: string;
  cell_type: string;
  source: string;
  metadata: { tags: string[] };
};
export type INotebookSnapshot = { path: string; cells: ICellSnapshot[] };

/** The notebook as the kernel-side exporter wants it. */
export function notebookSnapshot(
  panel: NotebookPanel,
  extraCells: ICellSnapshot[] = []
): INotebookSnapshot {
  const cells: ICellSnapshot[] = [];
  const model = panel.content.model;
  if (model) {
    for (let i = 0; i < model.cells.length; i++) {
      const cell = model.cells.get(i);
      const tags = cell.getMetadata('tags');
      cells.push({
        id: cell.id,
        cell_type: cell.type,
        source: cell.sharedModel.getSource(),
        metadata: { tags: Array.isArray(tags) ? tags.map(String) : [] }
      });
    }
  }
  return { path: panel.context.path, cells: [...cells, ...extraCells] };
}

/** Sends notebook snapshots to the kernel over the comm, once the kernel has the target. */
export class NotebookSync implements IDisposable {
  private _comm: Kernel.IComm | null = null;
  private _commKernel: Kernel.IKernelConnection | null = null;
  private _disposed = false;

  constructor(private readonly _panel: NotebookPanel) {
    NotebookActions.executionScheduled.connect(this._onScheduled, this);
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    this._disposed = true;
    NotebookActions.executionScheduled.disconnect(this._onScheduled, this);
    this._comm = null;
  }

  private _onScheduled(_: unknown, args: { notebook: unknown }): void {
    if (args.notebook !== this._panel.content) {
      return;
    }
    const snapshot = notebookSnapshot(this._panel);
    // Only notebooks that use Determined: the other kernels have no such comm target.
    if (!snapshot.cells.some(cell => USES_DETERMINED.test(cell.source))) {
      return;
    }
    this.send(snapshot);
  }

  /** Send a snapshot now (before the execute request that needs it: shell messages keep order). */
  send(snapshot: INotebookSnapshot): void {
    const kernel = this._panel.sessionContext.session?.kernel;
    if (!kernel) {
      return;
    }
    try {
      if (this._comm && this._commKernel === kernel && !this._comm.isDisposed) {
        this._comm.send(snapshot);
        return;
      }
      // The target exists once `%load_ext jupyter_determined` ran; until then the kernel
      // closes the comm at once and we try again at the next execution.
      const comm = kernel.createComm(COMM_TARGET);
      comm.onClose = () => {
        if (this._comm === comm) {
          this._comm = null;
        }
      };
      comm.open(snapshot);
      this._comm = comm;
      this._commKernel = kernel;
    } catch (error) {
      this._comm = null;
      console.warn('jupyter-determined: cannot send the notebook to the kernel', error);
    }
  }
}

const syncs = new WeakMap<NotebookPanel, NotebookSync>();

/** Start syncing `panel` (once per notebook widget; dispose the result with the widget). */
export function startNotebookSync(panel: NotebookPanel): NotebookSync {
  const sync = new NotebookSync(panel);
  syncs.set(panel, sync);
  return sync;
}

/** The sync of `panel`, started if it was not. */
export function notebookSync(panel: NotebookPanel): NotebookSync {
  return syncs.get(panel) ?? startNotebookSync(panel);
}

/**
 * Export you can see: the commands "Determined: Preview Export" and "Determined: Toggle det-skip"
 * (command palette, the cell context menu, a "Preview export" button in the notebook toolbar),
 * the live preview panel beside a notebook, and the det-skip toggles on cells (skipToggle.ts).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget, ToolbarButton } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import type { Cell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { DisposableDelegate } from '@lumino/disposable';
import { Widget } from '@lumino/widgets';

import { h, replaceChildren } from '../dom';
import { ExportPreviewView } from './exportPreview';
import { ICellPreview, cellLabel, previewTarget, submitKind } from './exportPreviewModel';
import { NotebookWatcher, SkipMarkers, isSkipped, setSkipped } from './skipToggle';
import { notebookSnapshot } from './notebookSync';

export const ExportCommandIDs = {
  previewExport: 'determined:preview-export',
  toggleSkip: 'determined:toggle-det-skip'
} as const;

const REFRESH_DELAY_MS = 300;
const WHOLE_NOTEBOOK = '';

/** The cell of `panel` with this id, if any. */
function cellById(panel: NotebookPanel, id: string): Cell | undefined {
  return panel.content.widgets.find(cell => cell.model.id === id);
}

/** Flip `det-skip` on the cell with this id (from a preview row). */
export function toggleSkipById(panel: NotebookPanel, id: string): void {
  const cell = cellById(panel, id);
  if (cell) {
    setSkipped(cell.model);
  }
}

/** Select the cell in its notebook and bring the notebook forward. */
function revealCell(app: JupyterFrontEnd, panel: NotebookPanel, preview: ICellPreview): void {
  const notebook = panel.content;
  const cell = (preview.id && cellById(panel, preview.id)) || notebook.widgets[preview.index];
  if (!cell) {
    return;
  }
  app.shell.activateById(panel.id);
  notebook.activeCellIndex = notebook.widgets.indexOf(cell);
  notebook.mode = 'command';
  void notebook.scrollToCell(cell, 'center');
}

/**
 * The preview beside a notebook: follows its edits and tags live, for the submission picked in
 * its header (the whole notebook, or one of the notebook's submitting cells).
 */
export class ExportPreviewPanel extends Widget {
  readonly view: ExportPreviewView;
  private readonly _picker: HTMLSelectElement;
  private readonly _watcher: NotebookWatcher;
  private _target: string = WHOLE_NOTEBOOK;
  private _timer = 0;

  constructor(
    readonly notebook: NotebookPanel,
    private readonly _settings: ServerConnection.ISettings,
    app: JupyterFrontEnd
  ) {
    super();
    this.addClass('jp-Det-exportPreviewPanel');
    this.id = `jp-Det-exportPreview-${notebook.id}`;
    this.title.label = `Export: ${PathExt.basename(notebook.context.path)}`;
    this.title.caption = `What a Determined submission of ${notebook.context.path} exports`;
    this.title.closable = true;
    this._picker = h('select', {
      class: 'jp-Det-select jp-Det-xpTarget',
      title: 'Which submission to preview',
      on: { change: () => this.setTarget(this._picker.value) }
    });
    const refresh = h(
      'button',
      {
        class: 'jp-Det-button',
        title: 'Export again now',
        on: { click: () => void this.refresh() }
      },
      'Refresh'
    );
    this.view = new ExportPreviewView({
      onToggleSkip: id => toggleSkipById(notebook, id),
      onReveal: cell => revealCell(app, notebook, cell),
      scriptOpen: false
    });
    this.node.append(
      h('div', { class: 'jp-Det-xpToolbar' }, h('label', null, 'Preview: ', this._picker), refresh),
      this.view.node
    );
    this._watcher = new NotebookWatcher(notebook, () => this.schedule());
    notebook.disposed.connect(() => this.dispose());
  }

  get target(): string {
    return this._target;
  }

  /** A submitting cell's id, or '' for the whole notebook (the toolbar's submission). */
  setTarget(target: string | null): void {
    this._target = target ?? WHOLE_NOTEBOOK;
    void this.refresh();
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearTimeout(this._timer);
    this._watcher.dispose();
    this.view.dispose();
    super.dispose();
  }

  /** Refresh a moment after the last change (typing sends one change per key). */
  schedule(): void {
    window.clearTimeout(this._timer);
    this._timer = window.setTimeout(() => void this.refresh(), REFRESH_DELAY_MS);
  }

  async refresh(): Promise<void> {
    if (this.isDisposed) {
      return;
    }
    const snapshot = notebookSnapshot(this.notebook);
    const submitting = snapshot.cells
      .map((cell, index) => ({ cell, index }))
      .filter(({ cell }) => cell.cell_type === 'code' && submitKind(cell.source) !== null);
    if (this._target && !submitting.some(({ cell }) => cell.id === this._target)) {
      this._target = WHOLE_NOTEBOOK; // the cell was deleted or no longer submits
    }
    const options: [string, string][] = [
      [WHOLE_NOTEBOOK, 'The whole notebook (toolbar “Submit to Determined”)']
    ];
    for (const { cell, index } of submitting) {
      const first = cell.source.split('\n').find(line => line.trim()) ?? '';
      options.push([cell.id, `${cellLabel({ index })}: ${first.trim().slice(0, 60)}`]);
    }
    replaceChildren(
      this._picker,
      ...options.map(([value, label]) =>
        h('option', { props: { value, selected: value === this._target } }, label)
      )
    );
    this._picker.value = this._target;
    await this.view.load({ ...snapshot, submit_cell_id: this._target || null }, this._settings);
  }
}

/** Registers the commands, menu items, toolbar button and cell toggles. */
export function activateExportTools(
  app: JupyterFrontEnd,
  notebooks: INotebookTracker | null,
  palette: ICommandPalette | null
): void {
  if (!notebooks) {
    return;
  }
  const settings = app.serviceManager.serverSettings;
  const previews = new Map<NotebookPanel, MainAreaWidget<ExportPreviewPanel>>();

  const notebookOf = (args: Record<string, unknown>): NotebookPanel | null => {
    const id = args.notebookId;
    return (
      (typeof id === 'string' && notebooks.find(panel => panel.id === id)) ||
      notebooks.currentWidget
    );
  };

  /** The cells a command acts on: the right-clicked cell, else the selected ones. */
  const targetCells = (panel: NotebookPanel): Cell[] => {
    const clicked = app.contextMenuHitTest(node => node.classList.contains('jp-Cell'));
    const hit = clicked && panel.content.widgets.find(cell => cell.node === clicked);
    if (hit && !panel.content.isSelectedOrActive(hit)) {
      return [hit];
    }
    return panel.content.widgets.filter(cell => panel.content.isSelectedOrActive(cell));
  };

  app.commands.addCommand(ExportCommandIDs.previewExport, {
    label: 'Determined: Preview Export',
    caption:
      'Which cells a Determined submission exports into the trial script, and why the others are left out',
    isEnabled: () => notebooks.currentWidget !== null,
    execute: async args => {
      const panel = notebookOf(args);
      if (!panel) {
        return;
      }
      let widget = previews.get(panel);
      if (!widget || widget.isDisposed) {
        const content = new ExportPreviewPanel(panel, settings, app);
        widget = new MainAreaWidget({ content });
        widget.id = `${content.id}-area`;
        widget.title.label = content.title.label;
        widget.title.caption = content.title.caption;
        widget.title.closable = true;
        const created = widget;
        previews.set(panel, created);
        created.disposed.connect(() => {
          if (previews.get(panel) === created) {
            previews.delete(panel);
          }
        });
        app.shell.add(created, 'main', { mode: 'split-right', ref: panel.id });
      }
      const cells = notebookSnapshot(panel).cells;
      const explicit = typeof args.cellId === 'string' ? args.cellId : null;
      widget.content.setTarget(explicit ?? previewTarget(cells, panel.content.activeCellIndex));
      app.shell.activateById(widget.id);
      return widget;
    }
  });

  app.commands.addCommand(ExportCommandIDs.toggleSkip, {
    label: 'Determined: Toggle det-skip',
    caption:
      'Add or remove the det-skip tag: a cell tagged det-skip is left out of Determined experiments',
    isEnabled: () => !!notebooks.currentWidget?.content.activeCell,
    execute: args => {
      const panel = notebookOf(args);
      if (!panel) {
        return;
      }
      const cells =
        typeof args.cellId === 'string'
          ? [cellById(panel, args.cellId)].filter((c): c is Cell => !!c)
          : targetCells(panel);
      const code = cells.filter(cell => cell.model.type === 'code');
      // Several cells: all skipped → include them all; otherwise skip them all.
      const skip = !code.every(cell => isSkipped(cell.model));
      for (const cell of code) {
        setSkipped(cell.model, skip);
      }
    }
  });

  if (palette) {
    palette.addItem({ command: ExportCommandIDs.previewExport, category: 'Determined' });
    palette.addItem({ command: ExportCommandIDs.toggleSkip, category: 'Determined' });
  }
  app.contextMenu.addItem({
    command: ExportCommandIDs.toggleSkip,
    selector: '.jp-Notebook .jp-CodeCell',
    rank: 60
  });
  app.contextMenu.addItem({
    command: ExportCommandIDs.previewExport,
    selector: '.jp-Notebook .jp-Cell',
    rank: 61
  });

  app.docRegistry.addWidgetExtension('Notebook', {
    createNew: (panel: NotebookPanel) => {
      const markers = new SkipMarkers(panel);
      const button = new ToolbarButton({
        className: 'jp-Det-previewButton',
        label: 'Preview export',
        tooltip: 'Which cells a Determined submission exports, and why the others are left out',
        onClick: () =>
          void app.commands.execute(ExportCommandIDs.previewExport, { notebookId: panel.id })
      });
      panel.toolbar.insertItem(11, 'determinedPreviewExport', button);
      return new DisposableDelegate(() => {
        button.dispose();
        markers.dispose();
      });
    }
  });
}

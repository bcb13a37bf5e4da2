/**
 * The export preview: every cell of the notebook with whether it goes into the experiment's
 * script and why not (det-skip, markdown, empty, another `%%det_submit` cell, below the
 * submitting cell, a syntax error), the IPython lines the export drops or replaces, and the
 * script itself. The data comes from the server's exporter (exportPreviewModel.ts); this widget
 * only renders it, in the "Submit to Determined" dialog and in the "Preview Export" panel.
 */
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { h, replaceChildren } from '../dom';
import {
  ICellPreview,
  IExportPreview,
  IPreviewRequest,
  SKIP_TAG,
  cellLabel,
  fetchExportPreview,
  previewHeading,
  previewSummary,
  statusLabel
} from './exportPreviewModel';

export interface IExportPreviewViewOptions {
  /** Adds or removes `det-skip` on the notebook's cell (the row's skip/include button). */
  onToggleSkip?: (cellId: string) => void;
  /** Shows the cell in the notebook (the row's cell label). */
  onReveal?: (cell: ICellPreview) => void;
  /** The script open from the start (the panel) or folded (the dialog). */
  scriptOpen?: boolean;
}

/** Whether the row offers to skip or include the cell (code cells that could go in). */
function skipAction(cell: ICellPreview): 'skip' | 'include' | null {
  if (cell.cell_type !== 'code' || !cell.id) {
    return null;
  }
  if (cell.status === 'exported' || cell.status === 'error') {
    return 'skip';
  }
  return cell.reason === SKIP_TAG ? 'include' : null;
}

function scriptLines(cell: ICellPreview): string | null {
  if (!cell.script_lines) {
    return null;
  }
  const [first, last] = cell.script_lines;
  return first === last ? `script line ${first}` : `script lines ${first}–${last}`;
}

function lineCount(text: string): number {
  return text ? text.split('\n').length - (text.endsWith('\n') ? 1 : 0) : 0;
}

export class ExportPreviewView extends Widget {
  private readonly _body: HTMLElement;
  private _request = 0;
  private _preview: IExportPreview | null = null;

  constructor(private readonly _options: IExportPreviewViewOptions = {}) {
    super();
    this.addClass('jp-Det-exportPreview');
    this._body = h('div', { class: 'jp-Det-xpBody', attrs: { 'aria-live': 'polite' } });
    this.node.appendChild(this._body);
  }

  get preview(): IExportPreview | null {
    return this._preview;
  }

  /** Ask the server and show its answer; an older request answering late is ignored. */
  async load(
    request: IPreviewRequest,
    settings: ServerConnection.ISettings
  ): Promise<IExportPreview | null> {
    const id = ++this._request;
    this.node.dataset.state = 'loading';
    if (!this._preview) {
      replaceChildren(
        this._body,
        h('div', { class: 'jp-Det-xpLoading' }, 'Exporting the notebook…')
      );
    }
    try {
      const preview = await fetchExportPreview(request, settings);
      if (id === this._request && !this.isDisposed) {
        this.render(preview);
      }
      return preview;
    } catch (error) {
      if (id === this._request && !this.isDisposed) {
        this._preview = null;
        this.node.dataset.state = 'error';
        replaceChildren(
          this._body,
          h(
            'div',
            { class: 'jp-Det-error', attrs: { role: 'alert' } },
            `Cannot preview the export: ${error instanceof Error ? error.message : String(error)}`
          )
        );
      }
      return null;
    }
  }

  render(preview: IExportPreview): void {
    // Keep the script's fold and scroll position across refreshes.
    const details = this._body.querySelector('details');
    const scriptOpen = details ? details.open : !!this._options.scriptOpen;
    this._preview = preview;
    this.node.dataset.state = preview.errors.length ? 'failing' : 'ready';
    this.node.dataset.mode = preview.mode;
    replaceChildren(
      this._body,
      h('div', { class: 'jp-Det-xpHeading' }, previewHeading(preview)),
      h('div', { class: 'jp-Det-xpSummary' }, previewSummary(preview)),
      preview.errors.length
        ? h(
            'div',
            { class: 'jp-Det-error jp-Det-xpErrors', attrs: { role: 'alert' } },
            ...preview.errors.map(error => h('div', null, error))
          )
        : null,
      h('ol', { class: 'jp-Det-xpCells' }, ...preview.cells.map(cell => this._row(cell))),
      preview.script === null
        ? null
        : h(
            'details',
            { class: 'jp-Det-xpScript', props: { open: scriptOpen } },
            h(
              'summary',
              null,
              `The exported script (${lineCount(preview.script)} lines, _det_notebook_cell.py)`
            ),
            h('pre', null, preview.script)
          )
    );
  }

  private _row(cell: ICellPreview): HTMLElement {
    const action = skipAction(cell);
    const onToggle = this._options.onToggleSkip;
    const onReveal = this._options.onReveal;
    const label = cellLabel(cell);
    let detail: string | null;
    if (cell.status === 'exported' || cell.status === 'training') {
      detail = scriptLines(cell);
      if (cell.status === 'training') {
        detail = `${cell.note}${detail ? `, ${detail}` : ''}`;
      }
    } else {
      detail = cell.note;
    }
    return h(
      'li',
      {
        class: 'jp-Det-xpCell',
        attrs: {
          'data-status': cell.status,
          'data-reason': cell.reason ?? '',
          'data-cell-id': cell.id ?? '',
          'data-cell-type': cell.cell_type
        }
      },
      h(
        'div',
        { class: 'jp-Det-xpRow' },
        onReveal
          ? h(
              'button',
              {
                class: 'jp-Det-xpIndex jp-Det-link',
                title: 'Show this cell in the notebook',
                on: { click: () => onReveal(cell) }
              },
              label
            )
          : h('span', { class: 'jp-Det-xpIndex' }, label),
        h(
          'span',
          { class: 'jp-Det-xpChip', attrs: { 'data-status': cell.status } },
          statusLabel(cell)
        ),
        h(
          'code',
          { class: 'jp-Det-xpSource', title: cell.summary },
          cell.summary || (cell.cell_type === 'code' ? '(empty)' : '')
        ),
        action && onToggle && cell.id
          ? h(
              'button',
              {
                class: 'jp-Det-button jp-Det-xpSkip',
                attrs: { 'data-action': action },
                title:
                  action === 'skip'
                    ? `Tag this cell ${SKIP_TAG}: leave it out of experiments`
                    : `Remove the ${SKIP_TAG} tag: export this cell again`,
                on: { click: () => onToggle(cell.id as string) }
              },
              action === 'skip' ? `Skip (${SKIP_TAG})` : 'Include'
            )
          : null
      ),
      detail ? h('div', { class: 'jp-Det-xpNote' }, detail) : null,
      cell.warnings.length
        ? h(
            'ul',
            { class: 'jp-Det-xpWarnings' },
            ...cell.warnings.map(warning => h('li', null, warning))
          )
        : null
    );
  }
}

/**
 * The notebook toolbar's "Submit to Determined" (and, per notebook, the sync of notebookSync.ts):
 * pick a config (a `*.yaml` beside the notebook,
 *   editable) while the export preview shows which cells go in (a row's button adds or removes
 *   `det-skip`), then run `%det_submit` in the notebook's kernel and show what it answered.
 */
import { Dialog, ToolbarButton, showDialog } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import { Contents, Kernel, KernelMessage, ServerConnection } from '@jupyterlab/services';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';
import { JSONObject } from '@lumino/coreutils';
import { Widget } from '@lumino/widgets';

import { h, replaceChildren } from '../dom';
import { ExportPreviewView } from '../export/exportPreview';
import { notebookSnapshot, notebookSync, startNotebookSync } from '../export/notebookSync';
import { setSkipped } from '../export/skipToggle';

/** The id of the stand-in cell the toolbar submission runs as (see `submitNotebook`). */
export const TOOLBAR_CELL_ID = 'jupyter-determined-toolbar-submit';
const CONFIG_VARIABLE = '_det_toolbar_config';

/** Python string literal of any text (JSON strings are valid Python literals). */
export function pythonString(text: string): string {
  return JSON.stringify(text);
}

/** The kernel code the toolbar button runs. */
export function submitCode(config: { file: string } | { text: string }): string {
  if ('file' in config) {
    return `%det_submit ${config.file.includes(' ') ? pythonString(config.file) : config.file}`;
  }
  return `${CONFIG_VARIABLE} = ${pythonString(config.text)}\n%det_submit ${CONFIG_VARIABLE}`;
}

interface IExecution {
  ok: boolean;
  output: string;
}

async function execute(
  kernel: Kernel.IKernelConnection,
  code: string,
  metadata?: JSONObject
): Promise<IExecution> {
  const future = kernel.requestExecute(
    { code, stop_on_error: true, store_history: false },
    true,
    metadata
  );
  const chunks: string[] = [];
  let failed = false;
  future.onIOPub = (msg: KernelMessage.IIOPubMessage) => {
    if (KernelMessage.isStreamMsg(msg)) {
      chunks.push(String(msg.content.text));
    } else if (KernelMessage.isErrorMsg(msg)) {
      failed = true;
      chunks.push(`${msg.content.ename}: ${msg.content.evalue}\n`);
    } else if (
      (KernelMessage.isExecuteResultMsg(msg) || KernelMessage.isDisplayDataMsg(msg)) &&
      msg.content.data['text/plain']
    ) {
      const text = String(msg.content.data['text/plain']);
      if (!text.startsWith('Experiment') && !text.includes('Widget')) {
        chunks.push(`${text}\n`);
      }
    }
  };
  const reply = await future.done;
  if (reply.content.status !== 'ok') {
    failed = true;
  }
  // ANSI colour codes from IPython tracebacks would show as junk in a dialog.
  // eslint-disable-next-line no-control-regex -- the ESC character is what is matched
  return { ok: !failed, output: chunks.join('').replace(/\u001b\[[0-9;]*m/g, '') };
}

/** The dialog body: a config picker and an editable text area, beside the export preview. */
class SubmitDialogBody extends Widget {
  readonly picker: HTMLSelectElement;
  readonly textarea: HTMLTextAreaElement;
  readonly preview: ExportPreviewView;
  private _original = '';
  private _fileName = '';

  constructor(
    private readonly _contents: Contents.IManager,
    private readonly _directory: string,
    files: string[],
    private readonly _panel: NotebookPanel,
    private readonly _settings: ServerConnection.ISettings
  ) {
    super();
    this.addClass('jp-Det-submitDialog');
    this.picker = h('select', {
      class: 'jp-Det-select jp-Det-configPicker',
      on: { change: () => void this._load(this.picker.value) }
    });
    for (const file of files) {
      this.picker.appendChild(h('option', { props: { value: file } }, file));
    }
    this.picker.appendChild(h('option', { props: { value: '' } }, '(write a config here)'));
    this.textarea = h('textarea', {
      class: 'jp-Det-configText',
      props: {
        rows: 14,
        spellcheck: false,
        placeholder: 'searcher:\n  name: single\n  metric: loss\n  max_length: 1'
      }
    });
    // The toolbar submits the whole notebook: preview that (no submitting cell).
    this.preview = new ExportPreviewView({
      onToggleSkip: id => {
        const model = this._panel.content.model;
        for (let i = 0; model && i < model.cells.length; i++) {
          if (model.cells.get(i).id === id) {
            setSkipped(model.cells.get(i));
          }
        }
        this.loadPreview();
      }
    });
    this.node.append(
      h(
        'div',
        { class: 'jp-Det-submitConfig' },
        h('label', null, 'Config from this folder: ', this.picker),
        h(
          'div',
          { class: 'jp-Det-hint' },
          'Edit below if needed; the code cells listed on the right become the training script.'
        ),
        this.textarea
      ),
      h('div', { class: 'jp-Det-submitPreview' }, this.preview.node)
    );
    void this._load(files[0] ?? '');
    this.loadPreview();
  }

  loadPreview(): void {
    void this.preview.load(notebookSnapshot(this._panel), this._settings);
  }

  override dispose(): void {
    this.preview.dispose();
    super.dispose();
  }

  private async _load(file: string): Promise<void> {
    this._fileName = file;
    if (!file) {
      this._original = '';
      this.textarea.value =
        'searcher:\n  name: single\n  metric: loss\n  smaller_is_better: true\n  max_length: 1\nmax_restarts: 0\n';
      return;
    }
    try {
      const model = await this._contents.get(PathExt.join(this._directory, file), {
        content: true,
        format: 'text'
      });
      this._original = String(model.content ?? '');
      this.textarea.value = this._original;
    } catch (error) {
      this._original = '';
      this.textarea.value = `# cannot read ${file}: ${String(error)}\n`;
    }
  }

  /** The file when unchanged (so `%det_submit file.yaml` is what the user could type), else the text. */
  getValue(): { file: string } | { text: string } {
    if (this._fileName && this.textarea.value === this._original) {
      return { file: this._fileName };
    }
    return { text: this.textarea.value };
  }
}

async function configFiles(contents: Contents.IManager, directory: string): Promise<string[]> {
  try {
    const listing = await contents.get(directory, { content: true });
    return (listing.content as Contents.IModel[])
      .filter(item => item.type !== 'directory' && /\.(ya?ml)$/i.test(item.name))
      .map(item => item.name)
      .sort();
  } catch {
    return [];
  }
}

/** The whole flow of the toolbar button. */
export async function submitNotebook(
  panel: NotebookPanel,
  contents: Contents.IManager,
  openExperiment: (id: number) => void
): Promise<void> {
  const directory = PathExt.dirname(panel.context.path);
  const body = new SubmitDialogBody(
    contents,
    directory,
    await configFiles(contents, directory),
    panel,
    contents.serverSettings
  );
  const choice = await showDialog({
    title: 'Submit to Determined',
    body,
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Submit' })],
    focusNodeSelector: 'select'
  });
  if (!choice.button.accept || !choice.value) {
    return;
  }
  const config = choice.value;
  const session = panel.sessionContext;
  await session.ready;
  const kernel = session.session?.kernel;
  if (!kernel) {
    await showDialog({
      title: 'Submit to Determined',
      body: 'This notebook has no running kernel: start one (Kernel menu) and try again.',
      buttons: [Dialog.okButton()]
    });
    return;
  }
  const status = h('pre', { class: 'jp-Det-submitOutput' }, 'Submitting…');
  const statusWidget = new Widget({ node: h('div', null, status) });
  const progress = showDialog({
    title: 'Submit to Determined',
    body: statusWidget,
    buttons: [Dialog.okButton({ label: 'Close' })]
  });
  let result: IExecution;
  try {
    // Load the extension (silently), then hand over the notebook with a stand-in last cell
    // that the submission runs as: `%det_submit` exports the code cells above the running
    // cell, which is then the whole notebook.
    const loaded = await execute(
      kernel,
      "get_ipython().extension_manager.load_extension('jupyter_determined')"
    );
    if (!loaded.ok) {
      result = {
        ok: false,
        output: `Cannot load jupyter_determined in this kernel:\n${loaded.output}`
      };
    } else {
      const code = submitCode(config);
      notebookSync(panel).send(
        notebookSnapshot(panel, [
          { id: TOOLBAR_CELL_ID, cell_type: 'code', source: code, metadata: { tags: [] } }
        ])
      );
      result = await execute(kernel, code, { cellId: TOOLBAR_CELL_ID });
    }
  } catch (error) {
    result = { ok: false, output: String(error) };
  }
  const created = /Created (?:test )?experiment (\d+)/.exec(result.output);
  replaceChildren(
    status,
    result.output.trim() ||
      (result.ok ? 'Submitted.' : 'The kernel reported an error without a message.')
  );
  status.dataset.ok = String(result.ok && !!created);
  if (created) {
    const id = Number(created[1]);
    statusWidget.node.appendChild(
      h(
        'button',
        { class: 'jp-Det-button jp-Det-openCreated', on: { click: () => openExperiment(id) } },
        `Open experiment ${id}`
      )
    );
  }
  await progress;
}

/** Adds the button to every notebook's toolbar and the sync to every notebook. */
export class SubmitButtonExtension implements DocumentRegistry.IWidgetExtension<
  NotebookPanel,
  INotebookModel
> {
  constructor(
    private readonly _contents: Contents.IManager,
    private readonly _openExperiment: (id: number) => void
  ) {}

  createNew(panel: NotebookPanel): IDisposable {
    const sync = startNotebookSync(panel);
    const button = new ToolbarButton({
      className: 'jp-Det-submitButton',
      label: 'Submit to Determined',
      tooltip: 'Submit this notebook as a Determined experiment',
      onClick: () => void submitNotebook(panel, this._contents, this._openExperiment)
    });
    panel.toolbar.insertItem(10, 'determinedSubmit', button);
    return new DisposableDelegate(() => {
      button.dispose();
      sync.dispose();
    });
  }
}

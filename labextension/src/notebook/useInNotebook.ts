/**
 * "Use in notebook": a checkpoint's cell (the master's snippet: SDK download + the loader of
 * its framework) inserted into a notebook as a new code cell. The JupyterLab side (which
 * notebook, how a cell is inserted) is notebookInsert.ts; this part needs no DOM.
 *
 * The cell must not leak into later submissions: it goes into the notebook the experiment was
 * submitted from, BELOW its submitting cell (the export takes only cells above that one), and is
 * tagged `det-skip` (left out of every export, also of a later submit cell below it).
 */
import { SKIP_TAG } from '../api/contract.generated';
import type { ICheckpointSnippet, INotebookOrigin } from '../api/types';
import { submitKind } from '../export/exportPreviewModel';

/** A notebook cell as far as placing the new cell is concerned. */
export interface ICellInfo {
  readonly id: string;
  readonly source: string;
}

/** Where the cell goes: a notebook that can take a new code cell. */
export interface ICellTarget {
  /** The notebook's name, for the message. */
  readonly name: string;
  /** The notebook's cells, in order. */
  cells(): ICellInfo[];
  /** The index of the active cell (-1: none). */
  activeIndex(): number;
  /** Insert `code` as a code cell with `tags` at `index` and make it active. */
  insertCodeCell(code: string, index: number, tags: string[]): void;
}

/** What fetches a checkpoint's snippet (the API client). */
export interface ISnippetSource {
  checkpointSnippet(uuid: string): Promise<ICheckpointSnippet>;
}

/** Raised when there is no notebook to insert into. */
export class NoNotebookError extends Error {
  constructor() {
    super(
      'No notebook to insert the cell into: open or click into a notebook, then choose ' +
        '"Use in notebook" again.'
    );
    this.name = 'NoNotebookError';
  }
}

/** Whether the notebook at `path` (server-relative) with these cell ids is `origin`: it holds
 * one of the submitted cells, or its path is the recorded one (which may be absolute). */
export function isOriginNotebook(
  path: string,
  cellIds: ReadonlyArray<string>,
  origin: INotebookOrigin | null | undefined
): boolean {
  if (!origin) {
    return false;
  }
  const recorded = new Set(origin.cell_ids ?? []);
  if (cellIds.some(id => recorded.has(id))) {
    return true;
  }
  const want = origin.path;
  return !!want && !!path && (want === path || want.endsWith(`/${path}`));
}

/** The recorded path as a server-relative one, or null when it lies outside the server root. */
export function serverRelative(path: string, serverRoot: string): string | null {
  if (!path.startsWith('/')) {
    return path;
  }
  const root = serverRoot.replace(/\/+$/, '');
  return root && path.startsWith(`${root}/`) ? path.slice(root.length + 1) : null;
}

/**
 * The index the new cell goes to: right below the submitting cell — the last recorded cell,
 * or the first `%det_submit` cell after it (a line magic's cell is not recorded) — else below
 * the notebook's last submitting cell, else below the active cell, else at the end.
 */
export function insertionIndex(
  cells: ReadonlyArray<ICellInfo>,
  origin: INotebookOrigin | null | undefined,
  activeIndex: number
): number {
  const recorded = new Set(origin?.cell_ids ?? []);
  let last = -1;
  cells.forEach((cell, index) => {
    if (recorded.has(cell.id)) {
      last = index;
    }
  });
  if (last >= 0) {
    if (submitKind(cells[last].source) !== null) {
      return last + 1;
    }
    const next = cells.findIndex((cell, index) => index > last && submitKind(cell.source) !== null);
    return (next >= 0 ? next : last) + 1;
  }
  for (let index = cells.length - 1; index >= 0; index--) {
    if (submitKind(cells[index].source) !== null) {
      return index + 1;
    }
  }
  return activeIndex >= 0 ? activeIndex + 1 : cells.length;
}

/** The one-line confirmation shown after the cell was inserted. */
export function insertedMessage(uuid: string, snippet: ICheckpointSnippet, target: string): string {
  const loader: Record<ICheckpointSnippet['kind'], string> = {
    pytorch: 'loads it with det.pytorch.load_trial_from_checkpoint_path',
    keras: 'loads it with det.keras.load_model_from_checkpoint_path',
    estimator: 'loads it with det.estimator.load_estimator_from_checkpoint_path',
    core: 'lists its files (a Core API checkpoint)'
  };
  return (
    `Inserted a cell into ${target} that downloads checkpoint ${uuid} and ` +
    `${loader[snippet.kind]}. It is tagged ${SKIP_TAG}: no experiment includes it.`
  );
}

/**
 * Fetch the checkpoint's snippet and insert it into `target` (checked first: nothing is asked
 * of the master without a notebook), below the submitting cell of `origin`, tagged det-skip.
 * Returns the snippet inserted.
 */
export async function useCheckpointInNotebook(
  source: ISnippetSource,
  target: ICellTarget | null,
  uuid: string,
  origin?: INotebookOrigin | null
): Promise<ICheckpointSnippet> {
  if (!target) {
    throw new NoNotebookError();
  }
  const snippet = await source.checkpointSnippet(uuid);
  const index = insertionIndex(target.cells(), origin, target.activeIndex());
  target.insertCodeCell(snippet.code, index, [SKIP_TAG]);
  return snippet;
}

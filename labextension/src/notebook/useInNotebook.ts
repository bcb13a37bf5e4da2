/**
 * "Use in notebook": a checkpoint's cell (the master's snippet: SDK download + the loader of
 * its framework) inserted into a notebook as a new code cell. The JupyterLab side (which
 * notebook, how a cell is inserted) is notebookInsert.ts; this part needs no DOM.
 */
import type { ICheckpointSnippet } from '../api/types';

/** Where the cell goes: a notebook that can take a new code cell below its active one. */
export interface ICellTarget {
  /** The notebook's name, for the message. */
  readonly name: string;
  /** Insert `code` as a new code cell below the active cell and make it active. */
  insertCodeCellBelow(code: string): void;
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

/** The one-line confirmation shown after the cell was inserted. */
export function insertedMessage(uuid: string, snippet: ICheckpointSnippet, target: string): string {
  const loader: Record<ICheckpointSnippet['kind'], string> = {
    pytorch: 'loads it with det.pytorch.load_trial_from_checkpoint_path',
    keras: 'loads it with det.keras.load_model_from_checkpoint_path',
    estimator: 'loads it with det.estimator.load_estimator_from_checkpoint_path',
    core: 'lists its files (a Core API checkpoint)'
  };
  return `Inserted a cell into ${target} that downloads checkpoint ${uuid} and ${loader[snippet.kind]}.`;
}

/**
 * Fetch the checkpoint's snippet and insert it into `target` (checked first: nothing is asked
 * of the master without a notebook). Returns the snippet inserted.
 */
export async function useCheckpointInNotebook(
  source: ISnippetSource,
  target: ICellTarget | null,
  uuid: string
): Promise<ICheckpointSnippet> {
  if (!target) {
    throw new NoNotebookError();
  }
  const snippet = await source.checkpointSnippet(uuid);
  target.insertCodeCellBelow(snippet.code);
  return snippet;
}

/**
 * "Go to cell" from the sidebar's experiment tab: find (or open) the notebook an error came
 * from. The banner itself is views/errorBanner.ts, shared with the notebook's widget.
 */
import { PageConfig } from '@jupyterlab/coreutils';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { type GoToCell, openErrorNotebook, revealErrorLine } from '../views/errorBanner';
import type { INotebookOpener } from './notebookInsert';
import { serverRelative } from './useInNotebook';

export {
  attachErrorBanner,
  ErrorBanner,
  type GoToCell,
  openErrorNotebook,
  revealErrorLine
} from '../views/errorBanner';

/**
 * "Go to cell" of an experiment opened outside its notebook (the sidebar's experiment tab):
 * the error's notebook if open, else opened from its recorded path; then shown and the cursor
 * put on the line.
 */
export function goToErrorCell(
  notebooks: INotebookTracker,
  opener: INotebookOpener,
  activate: (panel: NotebookPanel) => void
): GoToCell {
  return async (error, origin) => {
    let panel = openErrorNotebook(notebooks, error, origin);
    const recorded = error.notebook ?? origin?.path;
    if (!panel && recorded) {
      const path = serverRelative(recorded, PageConfig.getOption('serverRoot'));
      panel = path ? await opener.open(path).catch(() => null) : null;
    }
    if (!panel) {
      return false;
    }
    activate(panel);
    await panel.context.ready;
    return revealErrorLine(panel.content, error);
  };
}

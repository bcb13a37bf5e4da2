/**
 * The JupyterLab side of "Use in notebook": which notebook gets the cell, and inserting it.
 * The output's own notebook when the button is in a notebook's live widget, else the notebook
 * the user worked in last (INotebookTracker.currentWidget).
 */
import { Notification } from '@jupyterlab/apputils';
import { NotebookActions, type INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import type { Widget } from '@lumino/widgets';

import { describeError, type DeterminedClient } from '../api/client';
import { insertedMessage, useCheckpointInNotebook, type ICellTarget } from './useInNotebook';

/** A notebook panel as a place for a new code cell below its active cell. */
export function notebookTarget(panel: NotebookPanel): ICellTarget {
  return {
    name: panel.context.path,
    insertCodeCellBelow(code: string): void {
      const notebook = panel.content;
      NotebookActions.insertBelow(notebook);
      const cell = notebook.activeCell;
      if (!cell || cell.model.type !== 'code') {
        NotebookActions.changeCellType(notebook, 'code');
      }
      notebook.activeCell!.model.sharedModel.setSource(code);
    }
  };
}

/** The notebook that holds `inside` (a notebook output), else the current notebook. */
export function targetNotebook(
  notebooks: INotebookTracker | null,
  inside?: Widget
): NotebookPanel | null {
  if (!notebooks) {
    return null;
  }
  if (inside) {
    const holder = notebooks.find(panel => panel.node.contains(inside.node));
    if (holder) {
      return holder;
    }
  }
  return notebooks.currentWidget;
}

/** The handler of a "Use in notebook" button: insert, then say what happened (or why not). */
export function useInNotebookHandler(
  client: DeterminedClient,
  notebooks: INotebookTracker | null,
  inside?: () => Widget | undefined
): (uuid: string) => Promise<void> {
  return async (uuid: string) => {
    const panel = targetNotebook(notebooks, inside?.());
    try {
      const target = panel ? notebookTarget(panel) : null;
      const snippet = await useCheckpointInNotebook(client, target, uuid);
      Notification.success(insertedMessage(uuid, snippet, target!.name), { autoClose: 5000 });
    } catch (error) {
      Notification.error(`Use in notebook: ${describeError(error)}`, { autoClose: false });
    }
  };
}

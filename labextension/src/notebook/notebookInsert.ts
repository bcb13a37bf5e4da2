/**
 * The JupyterLab side of "Use in notebook": which notebook gets the cell, and inserting it.
 * The notebook the experiment was submitted from (its `notebook` field: an open notebook holding
 * the submitted cells or at the recorded path, else that file opened); without one (an
 * experiment from the CLI or SDK, or a notebook since removed), the notebook holding the button's
 * widget, else the one the user picks in a dialog — never silently the last-used notebook.
 */
import { InputDialog, Notification } from '@jupyterlab/apputils';
import { PageConfig } from '@jupyterlab/coreutils';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { Widget } from '@lumino/widgets';

import { describeError, type DeterminedClient } from '../api/client';
import type { INotebookOrigin } from '../api/types';
import {
  insertedMessage,
  isOriginNotebook,
  NoNotebookError,
  serverRelative,
  useCheckpointInNotebook,
  type ICellTarget
} from './useInNotebook';

/** A notebook panel as a place for a new code cell. */
export function notebookTarget(panel: NotebookPanel): ICellTarget {
  return {
    name: panel.context.path,
    cells: () =>
      Array.from(panel.content.model?.sharedModel.cells ?? [], cell => ({
        id: cell.getId(),
        source: cell.getSource()
      })),
    activeIndex: () => panel.content.activeCellIndex,
    insertCodeCell(code: string, index: number, tags: string[]): void {
      const model = panel.content.model;
      if (!model) {
        throw new NoNotebookError();
      }
      model.sharedModel.insertCell(index, {
        cell_type: 'code',
        source: code,
        metadata: { tags }
      });
      panel.content.activeCellIndex = index;
      void panel.content.scrollToItem(index);
    }
  };
}

function cellIds(panel: NotebookPanel): string[] {
  return Array.from(panel.content.model?.sharedModel.cells ?? [], cell => cell.getId());
}

/** How the handler opens a notebook file and asks the user (JupyterLab's; replaceable). */
export interface INotebookOpener {
  /** Open the notebook at a server-relative path; null if it cannot be opened. */
  open(path: string): Promise<NotebookPanel | null>;
}

/** The notebook the cell goes into; null when there is none, 'cancelled' when the user
 * closed the dialog. */
export async function chooseNotebook(
  notebooks: INotebookTracker | null,
  origin: INotebookOrigin | null | undefined,
  inside?: Widget,
  opener?: INotebookOpener
): Promise<NotebookPanel | null | 'cancelled'> {
  if (!notebooks) {
    return null;
  }
  const open: NotebookPanel[] = [];
  notebooks.forEach(panel => {
    open.push(panel);
  });
  const fromOrigin = open.find(panel =>
    isOriginNotebook(panel.context.path, cellIds(panel), origin)
  );
  if (fromOrigin) {
    return fromOrigin;
  }
  const recorded = origin?.path
    ? serverRelative(origin.path, PageConfig.getOption('serverRoot'))
    : null;
  if (recorded && opener) {
    const opened = await opener.open(recorded).catch(() => null);
    if (opened) {
      return opened;
    }
  }
  if (inside) {
    const holder = open.find(panel => panel.node.contains(inside.node));
    if (holder) {
      return holder;
    }
  }
  if (open.length === 0) {
    return null;
  }
  const current = notebooks.currentWidget;
  const paths = open.map(panel => panel.context.path);
  const answer = await InputDialog.getItem({
    title: 'Use in notebook: which notebook?',
    label: origin?.path
      ? `The experiment came from ${origin.path}, which is not open here. Insert the cell into:`
      : 'The experiment records no notebook (submitted from the CLI or SDK?). Insert the cell into:',
    items: paths,
    current: current ? paths.indexOf(current.context.path) : 0,
    okLabel: 'Insert'
  });
  if (!answer.button.accept || answer.value === null) {
    return 'cancelled';
  }
  return open[paths.indexOf(answer.value)] ?? null;
}

/** The handler of a "Use in notebook" button: insert, then say what happened (or why not).
 * `origin` is the experiment's `notebook` field. */
export function useInNotebookHandler(
  client: DeterminedClient,
  notebooks: INotebookTracker | null,
  inside?: () => Widget | undefined,
  opener?: INotebookOpener
): (uuid: string, origin?: INotebookOrigin | null) => Promise<void> {
  return async (uuid: string, origin?: INotebookOrigin | null) => {
    try {
      const panel = await chooseNotebook(notebooks, origin, inside?.(), opener);
      if (panel === 'cancelled') {
        return;
      }
      if (panel) {
        await panel.context.ready;
      }
      const target = panel ? notebookTarget(panel) : null;
      const snippet = await useCheckpointInNotebook(client, target, uuid, origin);
      Notification.success(insertedMessage(uuid, snippet, target!.name), { autoClose: 5000 });
    } catch (error) {
      Notification.error(`Use in notebook: ${describeError(error)}`, { autoClose: false });
    }
  };
}

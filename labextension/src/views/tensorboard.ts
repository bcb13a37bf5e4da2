/**
 * TensorBoard in a JupyterLab tab: the master starts one on an experiment's trials, and the tab
 * shows it in an iframe through the Jupyter server's proxy (`<base_url>determined/tensorboard/<id>/`),
 * which serves it only to Jupyter's logged-in user (the iframe sends the page's cookie).
 */
import { IFrame, MainAreaWidget } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';

import { tensorBoardUrl } from '../model/tensorboardModel';
import type { ITensorBoard } from '../api/types';

export { tensorBoardFor, waitUntilServing } from '../model/tensorboardModel';

/** A main-area tab showing TensorBoard `board` (already serving). */
export function tensorBoardWidget(
  board: ITensorBoard,
  settings: ServerConnection.ISettings
): MainAreaWidget<IFrame> {
  // TensorBoard's page runs its own scripts and calls its data API on the same origin.
  const content = new IFrame({
    sandbox: ['allow-scripts', 'allow-same-origin', 'allow-downloads']
  });
  content.url = tensorBoardUrl(settings, board.id);
  content.addClass('jp-Det-tensorboard');
  const widget = new MainAreaWidget({ content });
  widget.id = `jupyter-determined-tensorboard-${board.id}`;
  const what = board.experimentIds.length
    ? `experiment ${board.experimentIds.join(', ')}`
    : `trial ${board.trialIds.join(', ')}`;
  widget.title.label = `TensorBoard: ${what}`;
  widget.title.caption = `TensorBoard ${board.id} (${what})`;
  widget.title.closable = true;
  widget.node.dataset.tensorboardId = board.id;
  return widget;
}

/**
 * Finding or starting the TensorBoard of experiments and waiting until it serves; where the Jupyter
 * server serves it. No DOM here (unit-tested); the tab itself is tensorboard.ts.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { DeterminedApiError, DeterminedClient } from '../api/client';
import { TENSORBOARD_PATH } from '../api/contract.generated';
import type { ITensorBoard } from '../api/types';

/** TensorBoard loads its plugins before it serves: seconds, more on a busy machine. */
export const START_TIMEOUT_MS = 180_000;
const POLL_MS = 500;

/** Where the Jupyter server serves TensorBoard `id` (the slash matters: its URLs are relative). */
export function tensorBoardUrl(settings: ServerConnection.ISettings, id: string): string {
  return URLExt.join(settings.baseUrl, TENSORBOARD_PATH, id) + '/';
}

/**
 * A TensorBoard showing exactly these experiments: a live one the master already runs, else a
 * new one (so reopening the tab does not start a second process).
 */
export async function tensorBoardFor(
  client: DeterminedClient,
  experimentIds: number[]
): Promise<ITensorBoard> {
  const wanted = [...experimentIds].sort((a, b) => a - b).join(',');
  const running = (await client.listTensorBoards()).find(
    board =>
      board.state !== 'STATE_TERMINATED' &&
      [...board.experimentIds].sort((a, b) => a - b).join(',') === wanted
  );
  return running ?? (await client.startTensorBoard(experimentIds));
}

/** Poll until `board` serves; an error naming why when it stopped or took too long. */
export async function waitUntilServing(
  client: DeterminedClient,
  board: ITensorBoard,
  timeoutMs = START_TIMEOUT_MS
): Promise<ITensorBoard> {
  const deadline = Date.now() + timeoutMs;
  while (board.state === 'STATE_STARTING') {
    if (Date.now() > deadline) {
      throw new DeterminedApiError(
        `TensorBoard ${board.id} did not start serving within ${timeoutMs / 1000} s`,
        504
      );
    }
    await new Promise(resolve => setTimeout(resolve, POLL_MS));
    board = await client.getTensorBoard(board.id);
  }
  if (board.state !== 'STATE_RUNNING') {
    throw new DeterminedApiError(
      `TensorBoard ${board.id} stopped: ${board.error || 'no reason given'}`,
      500
    );
  }
  return board;
}

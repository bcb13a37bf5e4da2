/**
 * Unit tests of the TensorBoard button's logic: reusing a running TensorBoard, waiting for it to
 * serve, and the URL the tab loads.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ServerConnection } from '@jupyterlab/services';

import { DeterminedClient } from '../src/api/client';
import { tensorBoardFor, tensorBoardUrl, waitUntilServing } from '../src/model/tensorboardModel';
import type { ITensorBoard } from '../src/api/types';

function board(id: string, state: ITensorBoard['state'], experimentIds: number[]): ITensorBoard {
  return { id, state, experimentIds, trialIds: [], serviceAddress: '', error: null };
}

/** A client answering each request with the next answer of its path; requests are recorded. */
function scriptedClient(answers: Record<string, unknown[]>): {
  client: DeterminedClient;
  requests: string[];
} {
  const requests: string[] = [];
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://lab.test/base/',
    token: '',
    fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
      const path = new URL(url).pathname.replace('/base/determined/api/v1/', '');
      requests.push(`${method} ${path}`);
      const queue = answers[`${method} ${path}`];
      assert.ok(queue && queue.length, `unexpected request ${method} ${path}`);
      return new Response(JSON.stringify(queue.shift()), { status: 200 });
    }
  });
  return { client: new DeterminedClient(settings), requests };
}

describe('tensorBoardFor', () => {
  test('reuses a live TensorBoard of exactly these experiments', async () => {
    const { client, requests } = scriptedClient({
      'GET tensorboards': [
        {
          tensorboards: [
            board('a', 'STATE_RUNNING', [3, 4]),
            board('b', 'STATE_RUNNING', [4]),
            board('c', 'STATE_TERMINATED', [3])
          ]
        }
      ]
    });
    assert.equal((await tensorBoardFor(client, [4])).id, 'b');
    assert.deepEqual(requests, ['GET tensorboards']);
  });

  test('starts one when none shows exactly these experiments', async () => {
    const { client, requests } = scriptedClient({
      'GET tensorboards': [{ tensorboards: [board('a', 'STATE_RUNNING', [3, 4])] }],
      'POST tensorboards': [{ tensorboard: board('new', 'STATE_STARTING', [3]) }]
    });
    assert.equal((await tensorBoardFor(client, [3])).id, 'new');
    assert.deepEqual(requests, ['GET tensorboards', 'POST tensorboards']);
  });
});

describe('waitUntilServing', () => {
  test('polls until it serves', async () => {
    const { client } = scriptedClient({
      'GET tensorboards/x': [
        { tensorboard: board('x', 'STATE_STARTING', [1]) },
        { tensorboard: board('x', 'STATE_RUNNING', [1]) }
      ]
    });
    const served = await waitUntilServing(client, board('x', 'STATE_STARTING', [1]));
    assert.equal(served.state, 'STATE_RUNNING');
  });

  test('a TensorBoard that stopped is an error naming why', async () => {
    const stopped = { ...board('x', 'STATE_TERMINATED', [1]), error: 'exited with code 1' };
    const { client } = scriptedClient({ 'GET tensorboards/x': [{ tensorboard: stopped }] });
    await assert.rejects(
      waitUntilServing(client, board('x', 'STATE_STARTING', [1])),
      /TensorBoard x stopped: exited with code 1/
    );
  });
});

test('the tab loads TensorBoard through the Jupyter server, with the trailing slash', () => {
  const settings = ServerConnection.makeSettings({ baseUrl: 'http://lab.test/base/' });
  assert.equal(tensorBoardUrl(settings, 'x'), 'http://lab.test/base/determined/tensorboard/x/');
});

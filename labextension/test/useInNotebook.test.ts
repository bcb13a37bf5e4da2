/**
 * "Use in notebook" without a browser: the checkpoint's snippet is fetched from the master and
 * inserted as one new cell into the target notebook; without a notebook nothing is asked.
 * (tests/browser/test_use_in_notebook_e2e.py clicks the real button in JupyterLab.)
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ServerConnection } from '@jupyterlab/services';

import { DeterminedClient } from '../src/api/client';
import type { ICheckpointSnippet } from '../src/api/types';
import {
  insertedMessage,
  NoNotebookError,
  useCheckpointInNotebook,
  type ICellTarget
} from '../src/notebook/useInNotebook';

const SNIPPET: ICheckpointSnippet = {
  kind: 'pytorch',
  code: 'from determined.experimental import client\npath = client.get_checkpoint("u-1").download()'
};

function recordingTarget(): ICellTarget & { cells: string[] } {
  const cells: string[] = [];
  return { name: 'work/Untitled.ipynb', cells, insertCodeCellBelow: code => cells.push(code) };
}

describe('useCheckpointInNotebook', () => {
  test('inserts the snippet the master gives for that checkpoint, once', async () => {
    const asked: string[] = [];
    const source = {
      checkpointSnippet: async (uuid: string) => {
        asked.push(uuid);
        return SNIPPET;
      }
    };
    const target = recordingTarget();
    const inserted = await useCheckpointInNotebook(source, target, 'u-1');
    assert.deepEqual(asked, ['u-1']);
    assert.deepEqual(target.cells, [SNIPPET.code]);
    assert.equal(inserted, SNIPPET);
  });

  test('without a notebook it says what to do and asks the master nothing', async () => {
    let asked = 0;
    const source = {
      checkpointSnippet: async () => {
        asked += 1;
        return SNIPPET;
      }
    };
    await assert.rejects(useCheckpointInNotebook(source, null, 'u-1'), (error: Error) => {
      assert.ok(error instanceof NoNotebookError);
      assert.match(error.message, /open or click into a notebook/);
      return true;
    });
    assert.equal(asked, 0);
  });

  test('a master error (e.g. a deleted checkpoint) inserts nothing', async () => {
    const source = {
      checkpointSnippet: async (): Promise<ICheckpointSnippet> => {
        throw new Error('checkpoint u-1 is DELETED: its files are gone');
      }
    };
    const target = recordingTarget();
    await assert.rejects(useCheckpointInNotebook(source, target, 'u-1'), /is DELETED/);
    assert.deepEqual(target.cells, []);
  });
});

describe('insertedMessage', () => {
  test('names the notebook, the checkpoint and the loader of its kind', () => {
    assert.equal(
      insertedMessage('u-1', { kind: 'keras', code: '' }, 'a.ipynb'),
      'Inserted a cell into a.ipynb that downloads checkpoint u-1 and loads it with ' +
        'det.keras.load_model_from_checkpoint_path.'
    );
    assert.match(insertedMessage('u-1', { kind: 'core', code: '' }, 'a.ipynb'), /Core API/);
  });
});

describe('DeterminedClient.checkpointSnippet', () => {
  test('asks GET checkpoints/{uuid}/snippet with the uuid escaped', async () => {
    const urls: string[] = [];
    const settings = ServerConnection.makeSettings({
      baseUrl: 'http://lab.test/',
      token: '',
      fetch: async (input: RequestInfo | URL) => {
        urls.push(
          typeof input === 'string' ? input : input instanceof URL ? input.href : input.url
        );
        return new Response(JSON.stringify(SNIPPET), { status: 200 });
      }
    });
    const answer = await new DeterminedClient(settings).checkpointSnippet('a/b');
    assert.deepEqual(answer, SNIPPET);
    assert.equal(new URL(urls[0]).pathname, '/determined/api/v1/checkpoints/a%2Fb/snippet');
  });
});

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
  insertionIndex,
  isOriginNotebook,
  NoNotebookError,
  serverRelative,
  useCheckpointInNotebook,
  type ICellInfo,
  type ICellTarget
} from '../src/notebook/useInNotebook';

const SNIPPET: ICheckpointSnippet = {
  kind: 'pytorch',
  code: 'from determined.experimental import client\npath = client.get_checkpoint("u-1").download()'
};

interface IRecorded extends ICellInfo {
  tags: string[];
}

/** A notebook of `sources` (ids c0, c1, ...) that records insertions. */
function recordingTarget(
  sources: string[] = ['import torch'],
  active = 0
): ICellTarget & { notebook: IRecorded[]; inserted: IRecorded[] } {
  const notebook: IRecorded[] = sources.map((source, i) => ({ id: `c${i}`, source, tags: [] }));
  const inserted: IRecorded[] = [];
  return {
    name: 'work/Untitled.ipynb',
    notebook,
    inserted,
    cells: () => notebook.map(({ id, source }) => ({ id, source })),
    activeIndex: () => active,
    insertCodeCell(code: string, index: number, tags: string[]) {
      const cell = { id: `new${inserted.length}`, source: code, tags };
      notebook.splice(index, 0, cell);
      inserted.push(cell);
    }
  };
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
    assert.deepEqual(
      target.inserted.map(cell => cell.source),
      [SNIPPET.code]
    );
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
    assert.deepEqual(target.inserted, []);
  });
});

describe('where the cell goes (it must not leak into later submissions)', () => {
  const source = { checkpointSnippet: async () => SNIPPET };

  test('below the %%det_submit cell the experiment recorded, tagged det-skip', async () => {
    // c2 is the submitting cell; the user's cursor is above it, in c0.
    const target = recordingTarget(
      ['import torch', 'X = load()', '%%det_submit cfg\ntrain()', 'plot()'],
      0
    );
    await useCheckpointInNotebook(source, target, 'u-1', {
      path: '/home/me/work/Untitled.ipynb',
      cell_ids: ['c0', 'c1', 'c2']
    });
    assert.deepEqual(
      target.notebook.map(cell => cell.id),
      ['c0', 'c1', 'c2', 'new0', 'c3']
    );
    assert.deepEqual(target.inserted[0].tags, ['det-skip']);
  });

  test('below a %det_submit line cell, which the experiment does not record', () => {
    const cells = ['a = 1', 'b = 2', '%det_submit cfg', 'c = 3'].map((source, i) => ({
      id: `c${i}`,
      source
    }));
    assert.equal(insertionIndex(cells, { cell_ids: ['c0', 'c1'] }, 0), 3);
  });

  test('without a record: below the last submitting cell, else the active cell', () => {
    const cells = ['%%det_submit\nx', 'y', '%%det_submit\nz', 'w'].map((source, i) => ({
      id: `c${i}`,
      source
    }));
    assert.equal(insertionIndex(cells, null, 0), 3);
    const plain = ['a', 'b', 'c'].map((source, i) => ({ id: `c${i}`, source }));
    assert.equal(insertionIndex(plain, null, 0), 1);
    assert.equal(insertionIndex(plain, null, -1), 3);
  });

  test('the origin notebook: one of its submitted cells, or its (absolute) path', () => {
    const origin = { path: '/srv/lab/proj/a.ipynb', cell_ids: ['x1', 'x2'] };
    assert.ok(isOriginNotebook('proj/a.ipynb', [], origin));
    assert.ok(isOriginNotebook('renamed.ipynb', ['x2'], origin));
    assert.ok(!isOriginNotebook('proj/b.ipynb', ['y'], origin));
    assert.ok(!isOriginNotebook('a.ipynb', ['x1'], null));
    assert.ok(!isOriginNotebook('oj/a.ipynb', [], { path: '/srv/lab/proj/a.ipynb' }));
  });

  test('a recorded path made server-relative to open it', () => {
    assert.equal(serverRelative('/srv/lab/proj/a.ipynb', '/srv/lab'), 'proj/a.ipynb');
    assert.equal(serverRelative('/srv/lab/proj/a.ipynb', '/srv/lab/'), 'proj/a.ipynb');
    assert.equal(serverRelative('proj/a.ipynb', '/srv/lab'), 'proj/a.ipynb');
    assert.equal(serverRelative('/elsewhere/a.ipynb', '/srv/lab'), null);
  });
});

describe('insertedMessage', () => {
  test('names the notebook, the checkpoint and the loader of its kind', () => {
    assert.equal(
      insertedMessage('u-1', { kind: 'keras', code: '' }, 'a.ipynb'),
      'Inserted a cell into a.ipynb that downloads checkpoint u-1 and loads it with ' +
        'det.keras.load_model_from_checkpoint_path. It is tagged det-skip: no experiment ' +
        'includes it.'
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

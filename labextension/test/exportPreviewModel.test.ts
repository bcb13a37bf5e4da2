/**
 * Unit tests of the export preview's pure helpers and its request (exportPreviewModel.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ServerConnection } from '@jupyterlab/services';

import {
  ICellPreview,
  IExportPreview,
  fetchExportPreview,
  hasSkipTag,
  previewHeading,
  previewSummary,
  previewTarget,
  statusLabel,
  submitKind,
  withSkipTag
} from '../src/export/exportPreviewModel';

function row(index: number, overrides: Partial<ICellPreview> = {}): ICellPreview {
  return {
    index,
    id: `c${index}`,
    cell_type: 'code',
    status: 'exported',
    reason: null,
    note: null,
    summary: 'x = 1',
    warnings: [],
    code: 'x = 1\n',
    script_lines: [12, 12],
    ...overrides
  };
}

function preview(cells: ICellPreview[], overrides: Partial<IExportPreview> = {}): IExportPreview {
  const counts = { exported: 0, training: 0, left_out: 0, error: 0 };
  for (const cell of cells) {
    counts[cell.status] += 1;
  }
  return {
    mode: 'notebook',
    notebook_path: 'a.ipynb',
    submit_cell_id: null,
    cells,
    script: '',
    warnings: [],
    errors: [],
    counts,
    ...overrides
  };
}

describe('det-skip tags', () => {
  test('adding keeps the other tags and never doubles det-skip', () => {
    assert.deepEqual(withSkipTag(['parameters'], true), ['parameters', 'det-skip']);
    assert.deepEqual(withSkipTag(['det-skip', 'x'], true), ['x', 'det-skip']);
    assert.deepEqual(withSkipTag(undefined, true), ['det-skip']);
  });

  test('removing leaves the others in order', () => {
    assert.deepEqual(withSkipTag(['a', 'det-skip', 'b'], false), ['a', 'b']);
    assert.deepEqual(withSkipTag('det-skip', false), []); // not a list: no tags
  });

  test('hasSkipTag reads only lists', () => {
    assert.equal(hasSkipTag(['det-skip']), true);
    assert.equal(hasSkipTag('det-skip'), false);
    assert.equal(hasSkipTag(['det-skipped']), false);
  });
});

describe('submitKind and previewTarget', () => {
  test('a cell magic on the first non-blank line, or a %det_submit line', () => {
    assert.equal(submitKind('\n%%det_submit cfg.yaml\nprint(1)'), 'cell');
    assert.equal(submitKind('config = {}\n%det_submit config'), 'line');
    assert.equal(submitKind('x = 1\n%%det_submit'), null); // not a cell magic there
    assert.equal(submitKind('print("%det_submit")'), null);
    assert.equal(submitKind('%det list'), null);
  });

  const cells = [
    { id: 'a', cell_type: 'code', source: 'x = 1' },
    { id: 's1', cell_type: 'code', source: '%%det_submit a.yaml\ntrain()' },
    { id: 'm', cell_type: 'markdown', source: '%%det_submit in prose' },
    { id: 's2', cell_type: 'code', source: '%det_submit b.yaml' }
  ];

  test('the active cell when it submits', () => {
    assert.equal(previewTarget(cells, 3), 's2');
    assert.equal(previewTarget(cells, 1), 's1');
  });

  test('else the only submitting cell, else the whole notebook', () => {
    assert.equal(previewTarget(cells, 0), null); // two submitting cells: ambiguous
    assert.equal(previewTarget(cells.slice(0, 3), 0), 's1');
    assert.equal(previewTarget(cells.slice(0, 1), 0), null);
    assert.equal(previewTarget([], -1), null);
  });
});

describe('wording', () => {
  test('the summary counts what goes in, what is left out, the dropped lines', () => {
    const cells = [
      row(0),
      row(1, { status: 'training', warnings: ['shell command dropped: !ls'] }),
      row(2, { status: 'left_out', reason: 'det-skip' }),
      row(3, { warnings: ['IPython magic dropped: %matplotlib inline'] })
    ];
    assert.equal(
      previewSummary(preview(cells)),
      '3 cells go in · 1 left out · 2 IPython lines dropped or replaced'
    );
    assert.equal(previewSummary(preview([row(0)])), '1 cell goes in · 0 left out');
    const failing = preview([row(0, { status: 'error' })]);
    assert.match(previewSummary(failing), /1 cell with errors: the submission would fail/);
  });

  test('status chips and headings', () => {
    assert.equal(statusLabel(row(0)), 'goes in');
    assert.equal(statusLabel(row(0, { status: 'left_out' })), 'left out');
    assert.equal(statusLabel(row(0, { status: 'training' })), 'training code');
    assert.match(previewHeading(preview([row(0)])), /whole notebook/);
    const cellMode = preview([row(0), row(1, { status: 'training' })], {
      mode: 'cell',
      submit_cell_id: 'c1'
    });
    assert.equal(
      previewHeading(cellMode),
      'What %%det_submit in cell 2 exports: the cells above it and its body'
    );
    const lineMode = preview([row(0), row(1, { status: 'left_out', reason: 'submitting' })], {
      mode: 'cell',
      submit_cell_id: 'c1'
    });
    assert.equal(
      previewHeading(lineMode),
      'What %det_submit in cell 2 exports: the cells above it'
    );
  });
});

describe('fetchExportPreview', () => {
  function settingsAnswering(
    status: number,
    body: string,
    seen: { url?: string; init?: RequestInit }[]
  ): ServerConnection.ISettings {
    return ServerConnection.makeSettings({
      baseUrl: 'http://lab.test/jl/',
      token: '',
      fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
        const url =
          typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
        seen.push({
          url,
          init:
            init ??
            (input instanceof Request
              ? { method: input.method, body: await input.text() }
              : undefined)
        });
        return new Response(body, { status });
      }
    });
  }

  test('posts the cells to <base_url>determined/export-preview', async () => {
    const seen: { url?: string; init?: RequestInit }[] = [];
    const answer = preview([row(0)]);
    const request = {
      path: 'a.ipynb',
      cells: [{ id: 'c0', cell_type: 'code', source: 'x = 1', metadata: { tags: [] } }],
      submit_cell_id: null
    };
    const result = await fetchExportPreview(
      request,
      settingsAnswering(200, JSON.stringify(answer), seen)
    );
    assert.deepEqual(result, answer);
    assert.equal(new URL(seen[0].url as string).pathname, '/jl/determined/export-preview');
    assert.equal(seen[0].init?.method, 'POST');
    assert.deepEqual(JSON.parse(String(seen[0].init?.body)), request);
  });

  test("an error carries the server's message", async () => {
    const settings = settingsAnswering(
      400,
      JSON.stringify({ message: "submit_cell_id: no cell with id 'x'" }),
      []
    );
    await assert.rejects(
      fetchExportPreview({ path: 'a.ipynb', cells: [] }, settings),
      /HTTP 400 — submit_cell_id: no cell with id 'x'/
    );
  });

  test('a server without the extension says what to check', async () => {
    const settings = settingsAnswering(404, '<html>Not Found</html>', []);
    await assert.rejects(
      fetchExportPreview({ path: 'a.ipynb', cells: [] }, settings),
      /server extension enabled/
    );
  });
});

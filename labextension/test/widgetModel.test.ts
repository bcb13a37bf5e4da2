/**
 * Unit tests of the notebook widget's log tail and error banner (src/notebook/widgetModel.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { ILogLine, ITrial } from '../src/api/types';
import {
  LogTail,
  TrialWithErrors,
  cutLine,
  errorBannerLines,
  ordinal
} from '../src/notebook/widgetModel';

function line(id: number, text: string, trialId = 1): ILogLine {
  return { id, trial_id: trialId, line: text } as ILogLine;
}

function trial(id: number, overrides: Partial<TrialWithErrors> = {}): TrialWithErrors {
  return {
    id,
    experiment_id: 1,
    state: 'COMPLETED',
    hparams: {},
    steps_completed: 0,
    ...overrides
  } as TrialWithErrors;
}

describe('cutLine', () => {
  test('keeps short lines and cuts long ones, saying how much', () => {
    assert.equal(cutLine('short\n'), 'short');
    assert.equal(cutLine('x'.repeat(20000), 400), `${'x'.repeat(400)}… (19,600 more characters)`);
  });
});

describe('LogTail', () => {
  test('polls that overlap add no duplicates and the tail stays bounded', () => {
    const tail = new LogTail(3);
    assert.equal(tail.add(1, [line(1, 'a'), line(2, 'b')]), true);
    assert.equal(tail.add(1, [line(1, 'a'), line(2, 'b')]), false); // the same answer again
    tail.add(1, [line(2, 'b'), line(3, 'c'), line(4, 'd')]);
    assert.deepEqual(tail.text(), ['[trial 1] b', '[trial 1] c', '[trial 1] d']);
  });

  test('a full answer of only new lines says that lines went by unseen', () => {
    const tail = new LogTail(3);
    tail.add(1, [line(1, 'a')]);
    tail.add(1, [line(50, 'x'), line(51, 'y'), line(52, 'z')]);
    assert.deepEqual(tail.text(), [
      '[trial 1] … more lines not shown (see Logs)',
      '[trial 1] y',
      '[trial 1] z'
    ]);
  });

  test('the notebook-error marker stays out of the tail', () => {
    const tail = new LogTail();
    tail.add(1, [
      line(1, 'ZeroDivisionError: division by zero'),
      line(2, 'DET_NOTEBOOK_ERROR {"line": 2}')
    ]);
    assert.deepEqual(tail.text(), ['[trial 1] ZeroDivisionError: division by zero']);
  });
});

describe('errorBannerLines', () => {
  test('names the notebook cell (1-based) and line, else the exit summary', () => {
    const c2 = {
      cell_id: 'c2',
      cell_index: 1,
      line: 2,
      exception: 'ZeroDivisionError: division by zero'
    };
    const lines = errorBannerLines([
      trial(1),
      trial(2, { state: 'ERROR', notebook_error: c2 }),
      trial(3, {
        state: 'ERROR',
        exit_summary: 'killed by SIGKILL (signal 9): possibly out of memory'
      }),
      trial(4, { state: 'ERROR' })
    ] as ITrial[]);
    assert.deepEqual(lines, [
      {
        trialId: 2,
        text: 'Trial 2 failed in cell 2, line 2: ZeroDivisionError: division by zero',
        cellId: 'c2',
        error: c2
      },
      {
        trialId: 3,
        text: 'Trial 3 failed: killed by SIGKILL (signal 9): possibly out of memory',
        cellId: null,
        error: null
      },
      { trialId: 4, text: 'Trial 4 failed', cellId: null, error: null }
    ]);
  });

  test('names the cell by its prompt and first line, as JupyterLab shows it', () => {
    const [ran, idle] = errorBannerLines([
      trial(5, {
        state: 'ERROR',
        notebook_error: {
          cell_id: 'b',
          cell_index: 4,
          line: 3,
          exception: 'ValueError: bad',
          execution_count: 7,
          code_number: 3,
          first_line: 'model = build(...)'
        }
      }),
      trial(6, {
        state: 'ERROR',
        notebook_error: {
          cell_id: 'c',
          cell_index: 6,
          line: 1,
          exception: 'KeyError',
          execution_count: null,
          code_number: 4,
          first_line: 'x = data["k"]'
        }
      })
    ] as ITrial[]);
    assert.equal(
      ran.text,
      'Trial 5 failed in [7], line 3 of the cell `model = build(...)`: ValueError: bad'
    );
    // It had not run when the notebook was submitted: no prompt number to show.
    assert.equal(
      idle.text,
      'Trial 6 failed in the 4th code cell, line 1 of the cell `x = data["k"]`: KeyError'
    );
    assert.deepEqual([1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111].map(ordinal), [
      '1st',
      '2nd',
      '3rd',
      '4th',
      '11th',
      '12th',
      '13th',
      '21st',
      '22nd',
      '101st',
      '111th'
    ]);
  });
});

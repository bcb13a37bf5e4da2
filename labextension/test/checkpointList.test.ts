/**
 * Unit tests of the Checkpoints section's list: best first by the searcher's direction, the best
 * marked, DELETED ones hidden until asked for, and what an empty table says.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { ICheckpoint } from '../src/api/types';
import { checkpointList, noCheckpointsText } from '../src/model/checkpointList';

function checkpoint(
  uuid: string,
  trial: number,
  steps: number,
  loss: number | string | null,
  state: 'COMPLETED' | 'DELETED' = 'COMPLETED'
): ICheckpoint {
  return {
    uuid,
    trial_id: trial,
    experiment_id: 1,
    steps_completed: steps,
    state,
    report_time: '',
    validation_metrics: loss === null ? null : { val_loss: loss }
  };
}

const CHECKPOINTS = [
  checkpoint('a', 1, 10, 0.5),
  checkpoint('b', 1, 20, 0.2, 'DELETED'),
  checkpoint('c', 2, 10, 0.3),
  checkpoint('d', 2, 20, null),
  checkpoint('e', 3, 10, 'NaN'),
  checkpoint('f', 3, 20, 0.4)
];

describe('checkpoint list', () => {
  test('best first for a smaller-is-better metric, no metric last, deleted hidden', () => {
    const list = checkpointList(CHECKPOINTS, 'val_loss', true);
    assert.deepEqual(
      list.rows.map(c => c.uuid),
      ['c', 'f', 'a', 'd', 'e']
    );
    assert.equal(list.best, 'c');
    assert.equal(list.hiddenDeleted, 1);
  });

  test('larger is better reverses the metric order, not the ones without it', () => {
    const list = checkpointList(CHECKPOINTS, 'val_loss', false);
    assert.deepEqual(
      list.rows.map(c => c.uuid),
      ['a', 'f', 'c', 'd', 'e']
    );
    assert.equal(list.best, 'a');
  });

  test('shown, a deleted checkpoint takes its place but is never the best', () => {
    const list = checkpointList(CHECKPOINTS, 'val_loss', true, true);
    assert.deepEqual(
      list.rows.map(c => c.uuid),
      ['b', 'c', 'f', 'a', 'd', 'e']
    );
    assert.equal(list.best, 'c');
    assert.equal(list.hiddenDeleted, 0);
  });

  test('no validation at all: by trial and step, and no best', () => {
    const list = checkpointList(
      [checkpoint('y', 2, 5, null), checkpoint('x', 1, 9, null), checkpoint('w', 1, 3, null)],
      'val_loss',
      true
    );
    assert.deepEqual(
      list.rows.map(c => c.uuid),
      ['w', 'x', 'y']
    );
    assert.equal(list.best, null);
  });

  test('an empty table says whether checkpoints may still come', () => {
    assert.equal(noCheckpointsText(false, 0), 'No checkpoints yet.');
    assert.equal(noCheckpointsText(true, 0), 'This experiment saved no checkpoints.');
    assert.equal(noCheckpointsText(true, 3), 'All 3 checkpoints were deleted.');
  });
});

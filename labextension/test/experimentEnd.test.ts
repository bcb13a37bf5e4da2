/**
 * Unit tests of when an experiment's end is announced, and what the notification says.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ExperimentEndWatch, endMessage } from '../src/model/experimentEnd';

describe('experiment end notifications', () => {
  test('an end is announced once, and only when the experiment was seen running', () => {
    const watch = new ExperimentEndWatch();
    // Finished before the page loaded: never announced.
    assert.equal(watch.update({ id: 1, state: 'COMPLETED' }), false);
    assert.equal(watch.update({ id: 2, state: 'ACTIVE' }), false);
    assert.equal(watch.update({ id: 2, state: 'PAUSED' }), false);
    assert.deepEqual(watch.running, [2]);
    assert.equal(watch.update({ id: 2, state: 'COMPLETED' }), true);
    // A repeated event (or a poll) of the same end says nothing more.
    assert.equal(watch.update({ id: 2, state: 'COMPLETED' }), false);
    assert.deepEqual(watch.running, []);
    // A deleted experiment is forgotten, not announced.
    watch.update({ id: 3, state: 'ACTIVE' });
    assert.equal(watch.update({ id: 3, state: 'DELETED', deleted: true }), false);
    assert.equal(watch.update({ id: 3, state: 'CANCELED' }), false);
  });

  test('the message names the experiment, its notebook and its outcome', () => {
    const searcher = { name: 'random', metric: 'loss', smaller_is_better: true };
    assert.deepEqual(
      endMessage(
        { id: 7, name: 'mnist', state: 'COMPLETED', best_validation: 0.125, searcher },
        'train.ipynb'
      ),
      {
        kind: 'success',
        text: 'Experiment 7 "mnist" (from train.ipynb) completed: best loss 0.125'
      }
    );
    const failed = endMessage(
      { id: 8, name: '', state: 'ERROR', best_validation: null, searcher },
      'a.ipynb'
    );
    assert.equal(failed.kind, 'error');
    assert.match(failed.text, /^Experiment 8 \(from a\.ipynb\) failed \(ERROR\)/);
    assert.equal(
      endMessage(
        { id: 9, name: 'x', state: 'CANCELED', best_validation: null, searcher },
        'b.ipynb'
      ).kind,
      'warning'
    );
  });
});

/**
 * Unit tests of what the fork / re-run / continue / register dialogs check before a request.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  canContinue,
  canRegister,
  canRunAgain,
  forkConfigText,
  modelNameProblem,
  parseLength,
  representativeTrial,
  searcherLength
} from '../src/model/actions';
import type { ITrial } from '../src/api/types';

function trial(id: number, loss: number | null): ITrial {
  return {
    id,
    experiment_id: 1,
    state: 'COMPLETED',
    hparams: {},
    restarts: 0,
    steps_completed: 10,
    start_time: '2026-11-22T01:00:00.000Z',
    end_time: null,
    best_validation:
      loss === null
        ? null
        : { steps_completed: 10, metrics: { loss }, report_time: '2026-11-22T01:00:00.000Z' }
  };
}

describe('fork, re-run and continue', () => {
  test('the length keeps the parent searcher unit', () => {
    assert.deepEqual(searcherLength({ searcher: { max_length: { batches: 100 } } }), {
      value: 100,
      unit: 'batches'
    });
    assert.deepEqual(searcherLength({ searcher: { max_length: 7 } }), { value: 7, unit: '' });
    assert.equal(searcherLength({ searcher: {} }), null);
    assert.equal(searcherLength(undefined), null);
  });

  test('a typed length is a positive whole number, or empty for the parent one', () => {
    assert.equal(parseLength(' 300 '), 300);
    assert.equal(parseLength(''), null);
    for (const bad of ['0', '-3', '2.5', 'ten', '1e3']) {
      const parsed = parseLength(bad);
      assert.ok(parsed !== null && typeof parsed === 'object', bad);
      assert.match((parsed as { problem: string }).problem, /positive whole number/);
    }
  });

  test('only a trial with a checkpoint can be continued; kernel runs cannot run again', () => {
    assert.equal(canContinue({ latest_checkpoint: 'abc' }), true);
    assert.equal(canContinue({ latest_checkpoint: null }), false);
    assert.equal(canRunAgain({ unmanaged: true }), false);
    assert.equal(canRunAgain({}), true);
  });

  test('a fork starts from the parent config as JSON', () => {
    const text = forkConfigText({ config: { name: 'x', searcher: { name: 'single' } } });
    assert.deepEqual(JSON.parse(text), { name: 'x', searcher: { name: 'single' } });
  });
});

describe('register a checkpoint', () => {
  test('only COMPLETED checkpoints are registered', () => {
    assert.equal(canRegister({ state: 'COMPLETED' }), true);
    assert.equal(canRegister({ state: 'DELETED' }), false);
  });

  test('a new model name is checked as the master checks it', () => {
    assert.equal(modelNameProblem('mnist cnn', ['other']), '');
    assert.match(modelNameProblem('  ', []), /needs a name/);
    assert.match(modelNameProblem('a/b', []), /slashes/);
    assert.match(modelNameProblem('123', []), /only digits/);
    assert.match(modelNameProblem('a  b', []), /two spaces/);
    assert.match(modelNameProblem('MNIST', ['mnist']), /exists: pick it/);
  });
});

describe('compare experiments', () => {
  test("an experiment is represented by its best trial, by its own metric's direction", () => {
    const trials = [trial(1, 0.5), trial(2, 0.2), trial(3, null)];
    const smaller = { searcher: { name: 'random', metric: 'loss', smaller_is_better: true } };
    const larger = { searcher: { name: 'random', metric: 'loss', smaller_is_better: false } };
    assert.equal(representativeTrial(smaller, trials)?.id, 2);
    assert.equal(representativeTrial(larger, trials)?.id, 1);
    // Without any validation: the newest trial; without trials: none.
    assert.equal(representativeTrial(smaller, [trial(4, null), trial(5, null)])?.id, 5);
    assert.equal(representativeTrial(smaller, []), null);
  });
});

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
  searcherLength
} from '../src/model/actions';

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

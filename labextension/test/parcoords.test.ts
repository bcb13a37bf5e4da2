/**
 * Unit tests of the parallel-coordinates model: axis kinds, positions, ticks and colours.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { axisFor, axisPosition, axisTicks, parcoordsModel } from '../src/chart/parcoordsModel';
import type { ITrial } from '../src/api/types';

function trial(id: number, hparams: Record<string, unknown>, metric: number | null): ITrial {
  return {
    id,
    experiment_id: 1,
    state: 'COMPLETED',
    hparams,
    restarts: 0,
    steps_completed: 10,
    start_time: '',
    end_time: null,
    searcher_metric: metric
  };
}

const config = {
  hyperparameters: {
    lr: { type: 'log', minval: -4, maxval: -1 },
    layers: { type: 'int', minval: 1, maxval: 4 },
    opt: { type: 'categorical', vals: ['sgd', 'adam'] },
    batch: { type: 'categorical', vals: [128, 32, 64] },
    seed: 7
  }
};

describe('parallel coordinates axes', () => {
  test('a linear axis scales min..max to 0..1', () => {
    const axis = axisFor('hp:layers', 'layers', [1, 4, 2], 'int');
    assert.equal(axis.kind, 'linear');
    assert.equal(axisPosition(axis, 1), 0);
    assert.equal(axisPosition(axis, 4), 1);
    assert.equal(axisPosition(axis, 2.5), 0.5);
    assert.equal(axisPosition(axis, 'x'), null);
  });

  test('a log axis places decades evenly', () => {
    const axis = axisFor('hp:lr', 'lr', [1e-4, 1e-3, 1e-2], 'log');
    assert.equal(axis.kind, 'log');
    assert.equal(axisPosition(axis, 1e-4), 0);
    assert.ok(Math.abs((axisPosition(axis, 1e-3) ?? -1) - 0.5) < 1e-12);
    assert.equal(axisPosition(axis, 1e-2), 1);
    assert.equal(axisPosition(axis, 0), null);
  });

  test('a log type with a non-positive value falls back to linear', () => {
    assert.equal(axisFor('hp:lr', 'lr', [0, 1e-3], 'log').kind, 'linear');
  });

  test('categorical axes: strings, or numbers the config calls categorical, in sorted order', () => {
    const opt = axisFor('hp:opt', 'opt', ['sgd', 'adam', 'sgd'], 'categorical');
    assert.equal(opt.kind, 'categorical');
    assert.deepEqual(opt.categories, ['adam', 'sgd']);
    assert.equal(axisPosition(opt, 'adam'), 0.25);
    assert.equal(axisPosition(opt, 'sgd'), 0.75);
    assert.equal(axisPosition(opt, 'rmsprop'), null);
    const batch = axisFor('hp:batch', 'batch', [128, 32, 64], 'categorical');
    assert.deepEqual(batch.categories, ['32', '64', '128']);
    // Without a config, a non-number makes an axis categorical.
    assert.equal(axisFor('hp:x', 'x', [1, 'two']).kind, 'categorical');
  });

  test('a constant axis sits in the middle', () => {
    const axis = axisFor('hp:c', 'c', [3, 3], 'int');
    assert.equal(axisPosition(axis, 3), 0.5);
    assert.deepEqual(axisTicks(axis), [{ pos: 0.5, label: '3' }]);
  });

  test('ticks: log ticks are powers of ten labelled 1e-n; linear ticks are round numbers', () => {
    const log = axisFor('hp:lr', 'lr', [1e-4, 1e-1], 'log');
    assert.deepEqual(
      axisTicks(log).map(t => t.label),
      ['1e-4', '1e-3', '1e-2', '1e-1']
    );
    const linear = axisFor('hp:x', 'x', [0, 1]);
    const ticks = axisTicks(linear);
    assert.deepEqual(
      ticks.map(t => t.label),
      ['0', '0.2', '0.4', '0.6', '0.8', '1']
    );
    assert.ok(ticks.every(t => t.pos >= 0 && t.pos <= 1));
  });
});

describe('parallel coordinates model', () => {
  const trials = [
    trial(1, { lr: 1e-4, layers: 1, opt: 'sgd', batch: 32, seed: 7 }, 0.5),
    trial(2, { lr: 1e-2, layers: 4, opt: 'adam', batch: 128, seed: 7 }, 0.1),
    trial(3, { lr: 1e-3, layers: 2, opt: 'adam', batch: 64, seed: 7 }, null)
  ];

  test('one axis per varying hyperparameter, then the metric; constants left out', () => {
    const model = parcoordsModel(
      trials,
      ['batch', 'layers', 'lr', 'opt', 'seed'],
      'loss',
      config,
      true
    );
    assert.deepEqual(
      model.axes.map(a => [a.label, a.kind]),
      [
        ['batch', 'categorical'],
        ['layers', 'linear'],
        ['lr', 'log'],
        ['opt', 'categorical'],
        ['best loss', 'linear']
      ]
    );
  });

  test('lines are scored so 1 is the best metric, by the searcher direction', () => {
    const smaller = parcoordsModel(trials, ['lr'], 'loss', config, true);
    assert.equal(smaller.bestTrialId, 2);
    assert.equal(smaller.lines.find(l => l.trialId === 2)?.score, 1);
    assert.equal(smaller.lines.find(l => l.trialId === 1)?.score, 0);
    assert.ok(Number.isNaN(smaller.lines.find(l => l.trialId === 3)!.score), 'no metric: no score');
    const larger = parcoordsModel(trials, ['lr'], 'loss', config, false);
    assert.equal(larger.bestTrialId, 1);
  });

  test('a trial without a metric has no point on the metric axis, but on the others', () => {
    const model = parcoordsModel(trials, ['lr'], 'loss', config, true);
    const line = model.lines.find(l => l.trialId === 3)!;
    assert.ok(Math.abs((line.positions[0] ?? -1) - 0.5) < 1e-12);
    assert.equal(line.positions[1], null);
  });

  test('when no hyperparameter varies, all are shown', () => {
    const model = parcoordsModel(
      [trial(1, { seed: 7 }, 1), trial(2, { seed: 7 }, 2)],
      ['seed'],
      'loss',
      config,
      true
    );
    assert.deepEqual(
      model.axes.map(a => a.label),
      ['seed', 'best loss']
    );
  });
});

/**
 * Unit tests of the search views' math (issue 28, item 10): hyperparameter importance, the
 * optimisation history, the contour's interpolation, and the learning curves' controls
 * (x axes, smoothing, CSV) and the profiler's system metrics.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  allPositive,
  availableXAxes,
  flattenSystemMetrics,
  seriesCsv,
  smoothSeries,
  xPlacer
} from '../src/model/curveTransforms';
import { forestImportance, hparamImportance, seededRandom } from '../src/model/importance';
import { contourPoints, interpolateGrid, optimizationHistory } from '../src/model/searchAnalysis';
import { alignSeries } from '../src/model/series';
import type { IMetricReport, ITrial } from '../src/api/types';

function trial(
  id: number,
  hparams: Record<string, unknown>,
  value: number | null,
  end: string | null = null
): ITrial {
  return {
    id,
    experiment_id: 1,
    state: end ? 'COMPLETED' : 'ACTIVE',
    hparams,
    restarts: 0,
    steps_completed: 10,
    start_time: `2026-11-28T00:00:${String(id).padStart(2, '0')}.000Z`,
    end_time: end,
    best_validation: value === null ? null : { steps_completed: 10, metrics: { loss: value } }
  } as ITrial;
}

function report(
  trialId: number,
  step: number,
  metrics: Record<string, unknown>,
  time: string,
  group = 'training'
): IMetricReport {
  return {
    id: step,
    trial_id: trialId,
    group,
    steps_completed: step,
    metrics,
    report_time: time
  };
}

describe('hyperparameter importance', () => {
  test('the hyperparameter the metric depends on takes (nearly) all of it', () => {
    const random = seededRandom(7);
    const trials: ITrial[] = [];
    for (let i = 1; i <= 40; i++) {
      const lr = random();
      const noise = random();
      trials.push(trial(i, { lr, noise, opt: i % 2 ? 'adam' : 'sgd' }, 10 * lr + 0.01 * random()));
    }
    const shares = hparamImportance(trials, ['lr', 'noise', 'opt'], 'loss');
    assert.equal(shares[0].hparam, 'lr');
    assert.ok(shares[0].importance > 0.8, JSON.stringify(shares));
    const total = shares.reduce((sum, s) => sum + s.importance, 0);
    assert.ok(Math.abs(total - 1) < 1e-9, String(total));
  });

  test('a categorical hyperparameter can be the important one', () => {
    const random = seededRandom(3);
    const trials = Array.from({ length: 30 }, (_, i) =>
      trial(i + 1, { opt: ['adam', 'sgd', 'rms'][i % 3], lr: random() }, i % 3 === 1 ? 5 : 1)
    );
    const shares = hparamImportance(trials, ['lr', 'opt'], 'loss');
    assert.equal(shares[0].hparam, 'opt', JSON.stringify(shares));
  });

  test('the same trials give the same bars (a seeded forest)', () => {
    const random = seededRandom(11);
    const trials = Array.from({ length: 12 }, (_, i) =>
      trial(i + 1, { a: random(), b: random() }, random())
    );
    assert.deepEqual(
      hparamImportance(trials, ['a', 'b'], 'loss'),
      hparamImportance(trials, ['a', 'b'], 'loss')
    );
  });

  test('constants, too few trials, and trials without a metric give nothing to rank', () => {
    const constant = [1, 2, 3, 4].map(i => trial(i, { a: 1, b: i }, i));
    assert.deepEqual(
      hparamImportance(constant, ['a', 'b'], 'loss').map(s => s.hparam),
      ['b']
    );
    assert.deepEqual(
      hparamImportance([trial(1, { a: 1 }, 1), trial(2, { a: 2 }, 2)], ['a'], 'loss'),
      []
    );
    assert.deepEqual(
      hparamImportance(
        [1, 2, 3, 4].map(i => trial(i, { a: i }, null)),
        ['a'],
        'loss'
      ),
      []
    );
  });

  test('two hyperparameters that split the trials alike share the credit (no alphabet bias)', () => {
    // Same values: every split one finds, the other finds as well. Ties once all went to the
    // first hyperparameter by name, which then looked important and its twin useless.
    const trials = [1, 2, 3, 4, 5, 6].map(i => trial(i, { a: i, z: i * 10 }, i * i));
    const shares = hparamImportance(trials, ['a', 'z'], 'loss');
    for (const share of shares) {
      assert.ok(share.importance > 0.3 && share.importance < 0.7, JSON.stringify(shares));
    }
  });

  test('a metric that does not vary explains nothing: all zero', () => {
    assert.deepEqual(forestImportance([[1, 2, 3, 4, 5]], [2, 2, 2, 2, 2]), [0]);
  });
});

describe('optimisation history', () => {
  test('values in end order, running trials last, with the best so far', () => {
    const trials = [
      trial(1, {}, 0.5, '2026-11-28T01:00:03.000Z'),
      trial(2, {}, 0.9, '2026-11-28T01:00:01.000Z'),
      trial(3, {}, 0.2, null),
      trial(4, {}, null, '2026-11-28T01:00:00.000Z'),
      trial(5, {}, 0.7, '2026-11-28T01:00:02.000Z')
    ];
    assert.deepEqual(optimizationHistory(trials, 'loss', true), {
      trialIds: [2, 5, 1, 3],
      values: [0.9, 0.7, 0.5, 0.2],
      bestSoFar: [0.9, 0.7, 0.5, 0.2]
    });
    assert.deepEqual(optimizationHistory(trials, 'loss', false).bestSoFar, [0.9, 0.9, 0.9, 0.9]);
  });
});

describe('contour', () => {
  test('a cell on a trial takes its value; the grid spans the values', () => {
    const trials = [
      trial(1, { x: 1, y: 1 }, 1),
      trial(2, { x: 10, y: 1 }, 5),
      trial(3, { x: 1, y: 3 }, 3),
      trial(4, { x: 'text', y: 1 }, 3)
    ];
    const points = contourPoints(trials, 'x', 'y', 'loss');
    assert.equal(points.length, 3);
    const grid = interpolateGrid(points, 3);
    assert.equal(grid.cells[0][0], 1); // lowest x, lowest y: trial 1
    assert.equal(grid.cells[0][2], 5); // highest x, lowest y: trial 2
    assert.equal(grid.cells[2][0], 3); // lowest x, highest y: trial 3
    assert.equal(grid.min, 1);
    assert.equal(grid.max, 5);
    assert.deepEqual(grid.xRange, [1, 10]);
    // Padded: the trials sit inside the grid, not on its edge.
    const padded = interpolateGrid(points, 3, false, false, 0.1);
    assert.deepEqual(padded.yRange, [0.8, 3.2]);
    const middle = grid.cells[1][1];
    assert.ok(middle > 1 && middle < 5, String(middle));
  });

  test('a log-sampled hyperparameter is placed by its exponent', () => {
    const points = [
      { trialId: 1, x: 0.0001, y: 0, value: 0 },
      { trialId: 2, x: 0.01, y: 0, value: 2 },
      { trialId: 3, x: 0.1, y: 1, value: 3 }
    ];
    // On a log axis 0.01 sits at 2/3 of the width: a 4-column grid's third column is nearer it.
    const grid = interpolateGrid(points, 4, true, false);
    assert.ok(Math.abs(grid.cells[0][2] - 2) < Math.abs(grid.cells[0][1] - 2));
  });
});

describe('learning curve controls', () => {
  const reports = new Map<number, IMetricReport[]>([
    [
      1,
      [
        report(1, 10, { loss: 4, epochs: 0 }, '2026-11-28T01:00:00.000Z'),
        report(1, 20, { loss: 2, epochs: 1 }, '2026-11-28T01:00:01.500Z'),
        report(1, 30, { loss: 1 }, '2026-11-28T01:00:03.000Z')
      ]
    ],
    [2, [report(2, 10, { loss: 8, epochs: 0 }, '2026-11-28T02:00:00.000Z')]]
  ]);

  test('epochs are offered only when a report carries them', () => {
    assert.deepEqual(availableXAxes(reports.get(1)!), ['steps', 'epochs', 'time']);
    assert.deepEqual(availableXAxes([report(1, 1, { loss: 1 }, '')]), ['steps']);
  });

  test('x axes: batches, epochs (reports without one left out), seconds since each trial began', () => {
    const byEpoch = alignSeries(reports, [1, 2], 'loss', xPlacer(reports, 'epochs'));
    assert.deepEqual(byEpoch.x, [0, 1]);
    assert.deepEqual(byEpoch.ys, [
      [4, 2],
      [8, undefined]
    ]);
    const byTime = alignSeries(reports, [1, 2], 'loss', xPlacer(reports, 'time'));
    // Trial 2 started an hour later: both start at 0.
    assert.deepEqual(byTime.x, [0, 1.5, 3]);
    assert.deepEqual(byTime.ys[1], [8, undefined, undefined]);
    assert.deepEqual(alignSeries(reports, [1], 'loss').x, [10, 20, 30]);
  });

  test('smoothing is a debiased EMA that keeps gaps and missing points', () => {
    assert.deepEqual(smoothSeries([1, 2, 3], 0), [1, 2, 3]);
    const smoothed = smoothSeries([4, undefined, null, 2], 0.5);
    assert.equal(smoothed[0], 4); // debiased: the first point is itself
    assert.equal(smoothed[1], undefined);
    assert.equal(smoothed[2], null);
    // (0.5*0.5*4 + 0.5*2) / (1 - 0.25) = 2 / 0.75
    assert.ok(Math.abs((smoothed[3] as number) - 2 / 0.75) < 1e-12);
  });

  test('log y needs every value positive', () => {
    assert.equal(allPositive([[1, undefined, null, 2]]), true);
    assert.equal(allPositive([[1], [0]]), false);
    assert.equal(allPositive([[undefined]]), false);
  });

  test('CSV: one column per series, empty where none, the non-finite value named', () => {
    const text = seriesCsv(
      'batches',
      [10, 20],
      ['trial 1', 'trial "2", best'],
      [
        [1.5, null],
        [undefined, 3]
      ],
      [{ series: 0, index: 1, value: -Infinity }]
    );
    assert.equal(text, 'batches,trial 1,"trial ""2"", best"\n10,1.5,\n20,-Infinity,3\n');
  });

  test("the profiler's nesting is flattened; the agent id is dropped unless there are several", () => {
    assert.deepEqual(flattenSystemMetrics({ agent: { cpu_util_simple: 12 } }), {
      cpu_util_simple: 12
    });
    assert.deepEqual(
      flattenSystemMetrics({ agent: { 'GPU-1': { gpu_util: 50, gpu_free_memory: 1e9 } } }),
      { 'GPU-1 › gpu_util': 50, 'GPU-1 › gpu_free_memory': 1e9 }
    );
    assert.deepEqual(flattenSystemMetrics({ a: { memory_free: 1 }, b: { memory_free: 2 } }), {
      'a › memory_free': 1,
      'b › memory_free': 2
    });
  });
});

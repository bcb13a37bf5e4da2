/**
 * A diverged run (issue 26): the master answers NaN/Infinity as the strings "NaN", "Infinity"
 * and "-Infinity" (strict JSON). The sidebar reads them back as numbers, charts them as gaps
 * with a marker, shows "NaN" in tables and never takes one for the best.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { decodeNonFinite, mayHoldNonFinite, parseApiJson } from '../src/api/nonFinite';
import { formatMetric } from '../src/model/format';
import { alignSeries, hparamScatter, metricNames } from '../src/model/series';
import { bestSearcherMetric, bestTrialId, sortTrials } from '../src/model/trialTable';
import type { IMetricReport, IMetricSnapshot, ITrial } from '../src/api/types';

function report(id: number, trialId: number, step: number, metrics: Record<string, unknown>) {
  return {
    id,
    trial_id: trialId,
    group: 'validation',
    steps_completed: step,
    metrics,
    report_time: '2026-11-22T01:02:03Z'
  } as IMetricReport;
}

function trial(id: number, overrides: Partial<ITrial> = {}): ITrial {
  return {
    id,
    experiment_id: 1,
    state: 'ACTIVE',
    hparams: {},
    restarts: 0,
    steps_completed: 0,
    start_time: '2026-11-22T01:02:03.000Z',
    end_time: null,
    ...overrides
  };
}

function snapshot(loss: number): IMetricSnapshot {
  return { steps_completed: 1, metrics: { loss }, report_time: '2026-11-22T01:02:03Z' };
}

describe('decoding the strict JSON of a diverged run', () => {
  const text = JSON.stringify({
    experiments: [{ id: 1, name: 'NaN', labels: ['Infinity'], best_validation: 'NaN' }],
    metrics: [{ metrics: { loss: 'NaN', up: 'Infinity', down: '-Infinity', note: 'x' } }],
    trial: { searcher_metric: '-Infinity', best_validation: { metrics: { loss: 'NaN' } } }
  });

  test('the answer is strict JSON that JSON.parse reads', () => {
    assert.ok(mayHoldNonFinite(text));
    assert.doesNotThrow(() => JSON.parse(text));
  });

  test('metric values and number fields become NaN/±Infinity; names and labels stay text', () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a free-form answer
    const value = parseApiJson(text) as any;
    assert.ok(Number.isNaN(value.experiments[0].best_validation));
    assert.equal(value.experiments[0].name, 'NaN');
    assert.deepEqual(value.experiments[0].labels, ['Infinity']);
    const metrics = value.metrics[0].metrics;
    assert.ok(Number.isNaN(metrics.loss));
    assert.equal(metrics.up, Infinity);
    assert.equal(metrics.down, -Infinity);
    assert.equal(metrics.note, 'x');
    assert.equal(value.trial.searcher_metric, -Infinity);
    assert.ok(Number.isNaN(value.trial.best_validation.metrics.loss));
  });

  test('answers without them are returned as parsed', () => {
    assert.equal(mayHoldNonFinite('{"loss": 0.5}'), false);
    assert.deepEqual(decodeNonFinite({ metrics: { loss: 0.5 } }), { metrics: { loss: 0.5 } });
  });
});

describe('charting a diverged run', () => {
  const byTrial = new Map<number, IMetricReport[]>([
    [
      1,
      [
        report(1, 1, 10, { loss: 1.0 }),
        report(2, 1, 20, { loss: NaN }),
        report(3, 1, 30, { loss: 0.5 }),
        report(4, 1, 40, { loss: Infinity })
      ]
    ],
    [2, [report(5, 2, 10, { loss: 2.0 }), report(6, 2, 30, { loss: -Infinity })]]
  ]);

  test('a non-finite value is a gap (null), listed for its marker', () => {
    const aligned = alignSeries(byTrial, [1], 'loss');
    assert.deepEqual(aligned.x, [10, 20, 30, 40]);
    assert.deepEqual(aligned.ys, [[1.0, null, 0.5, null]]);
    assert.equal(aligned.nonFinite.length, 2);
    assert.deepEqual(aligned.nonFinite[0], { series: 0, index: 1, value: NaN });
    assert.deepEqual(aligned.nonFinite[1], { series: 0, index: 3, value: Infinity });
  });

  test('with several trials, a step not reported stays undefined (spanned), not a gap', () => {
    const aligned = alignSeries(byTrial, [1, 2], 'loss');
    assert.deepEqual(aligned.ys, [
      [1.0, null, 0.5, null],
      [2.0, undefined, null, undefined]
    ]);
    assert.deepEqual(
      aligned.nonFinite.map(p => [p.series, p.index, p.value]),
      [
        [0, 1, NaN],
        [0, 3, Infinity],
        [1, 2, -Infinity]
      ]
    );
  });

  test('a metric that only ever diverged is still listed, so its chart can show the markers', () => {
    assert.deepEqual(metricNames([report(1, 1, 1, { loss: NaN })]), ['loss']);
  });
});

describe('tables and best picks', () => {
  test('tables show NaN and Infinity, not a blank or an error', () => {
    assert.equal(formatMetric(NaN), 'NaN');
    assert.equal(formatMetric(Infinity), 'Infinity');
    assert.equal(formatMetric(-Infinity), '-Infinity');
  });

  test('a non-finite metric is never the best', () => {
    const diverged = trial(1, { searcher_metric: NaN });
    const minusInf = trial(2, { best_validation: snapshot(-Infinity) });
    const fine = trial(3, { searcher_metric: 0.7 });
    assert.equal(bestSearcherMetric(diverged, 'loss'), null);
    assert.equal(bestSearcherMetric(minusInf, 'loss'), null);
    assert.equal(bestTrialId([diverged, minusInf, fine], 'loss'), 3);
    const scatter = hparamScatter(
      [
        trial(4, { hparams: { lr: 0.1 }, searcher_metric: NaN }),
        trial(5, { hparams: { lr: 0.2 }, searcher_metric: 0.7 })
      ],
      'lr',
      'loss'
    );
    assert.deepEqual(
      scatter.points.map(p => p.trialId),
      [5]
    );
  });

  test('sorting by the latest metric puts NaN last, and Infinity sorts as a number', () => {
    const latest = (id: number, loss: number) => trial(id, { latest_validation: snapshot(loss) });
    const rows = [latest(1, NaN), latest(2, Infinity), latest(3, 0.2), latest(4, Infinity)];
    assert.deepEqual(
      sortTrials(rows, 'latest', true, 'loss').map(t => t.id),
      [3, 2, 4, 1]
    );
    assert.deepEqual(
      sortTrials(rows, 'latest', false, 'loss').map(t => t.id),
      [2, 4, 3, 1]
    );
  });
});

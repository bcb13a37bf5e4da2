/**
 * Unit tests of the pure data and formatting code (`jlpm test`: tsc, then node's test runner).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  formatBytes,
  formatDuration,
  formatMetric,
  formatPercent,
  formatStartTime
} from '../src/model/format';
import { filterLogs, formatLogLine, logLevel } from '../src/model/logs';
import { LogBuffer } from '../src/model/model';
import { alignSeries, hparamScatter, metricNames } from '../src/model/series';
import { allowedActions, stateCategory } from '../src/model/states';
import {
  bestSearcherMetric,
  flattenHparams,
  hparamColumns,
  sortTrials
} from '../src/model/trialTable';
import type { ILogLine, IMetricReport, ITrial } from '../src/api/types';

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

function report(
  id: number,
  trialId: number,
  step: number,
  metrics: Record<string, unknown>,
  group = 'training'
): IMetricReport {
  return {
    id,
    trial_id: trialId,
    group,
    steps_completed: step,
    metrics,
    report_time: '2026-11-22T01:02:03Z'
  };
}

function logLine(id: number, line: string, overrides: Partial<ILogLine> = {}): ILogLine {
  return {
    id,
    trial_id: 1,
    rank: 0,
    stream: 'stdout',
    time: '2026-11-22T01:02:03Z',
    line,
    ...overrides
  };
}

describe('formatting', () => {
  test('percent clamps and rounds, and shows a dash for missing values', () => {
    assert.equal(formatPercent(0.456), '46%');
    assert.equal(formatPercent(1.7), '100%');
    assert.equal(formatPercent(-0.2), '0%');
    assert.equal(formatPercent(null), '—');
    assert.equal(formatPercent(Number.NaN), '—');
  });

  test('metrics keep 4 significant digits, integers stay integers', () => {
    assert.equal(formatMetric(0.123456), '0.1235');
    assert.equal(formatMetric(12), '12');
    assert.equal(formatMetric(1234.5678), '1235');
    assert.equal(formatMetric(0.00001234), '1.234e-5');
    assert.equal(formatMetric(null), '—');
    assert.equal(formatMetric(undefined), '—');
    assert.equal(formatMetric('adam'), 'adam');
    assert.equal(formatMetric(true), 'true');
    assert.equal(formatMetric([1, 2]), '[1,2]');
    assert.equal(formatMetric(Number.POSITIVE_INFINITY), 'Infinity');
  });

  test('start time shows the clock today and the date otherwise', () => {
    const when = new Date(2026, 10, 22, 9, 5, 7);
    assert.equal(formatStartTime(when.toISOString(), new Date(2026, 10, 22, 23, 0, 0)), '09:05:07');
    assert.equal(
      formatStartTime(when.toISOString(), new Date(2026, 10, 23, 1, 0, 0)),
      '2026-11-22 09:05'
    );
    assert.equal(formatStartTime(null), '—');
    assert.equal(formatStartTime('not a time'), 'not a time');
  });

  test('durations and bytes', () => {
    assert.equal(formatDuration(42.9), '42s');
    assert.equal(formatDuration(185), '3m 05s');
    assert.equal(formatDuration(3720), '1h 02m');
    assert.equal(formatDuration(-1), '—');
    assert.equal(formatBytes(512), '512 B');
    assert.equal(formatBytes(1536), '1.5 KiB');
    assert.equal(formatBytes(16 * 2 ** 30), '16.0 GiB');
    assert.equal(formatBytes(undefined), '—');
  });

  test('state categories', () => {
    assert.equal(stateCategory('ACTIVE'), 'active');
    assert.equal(stateCategory('STOPPING_CANCELED'), 'stopping');
    assert.equal(stateCategory('STOPPING_ERROR'), 'stopping');
    assert.equal(stateCategory('ERROR'), 'error');
    assert.equal(stateCategory('SOMETHING_NEW'), 'unknown');
  });
});

describe('experiment actions', () => {
  test('actions allowed in each state match the master (409 otherwise)', () => {
    assert.deepEqual([...allowedActions({ state: 'ACTIVE', archived: false })].sort(), [
      'kill',
      'pause'
    ]);
    assert.deepEqual([...allowedActions({ state: 'PAUSED', archived: false })].sort(), [
      'activate',
      'kill'
    ]);
    assert.deepEqual([...allowedActions({ state: 'STOPPING_CANCELED', archived: false })].sort(), [
      'kill'
    ]);
    assert.deepEqual([...allowedActions({ state: 'COMPLETED', archived: false })].sort(), [
      'archive'
    ]);
    assert.deepEqual([...allowedActions({ state: 'ERROR', archived: true })].sort(), ['unarchive']);
  });
});

describe('trials table', () => {
  const trials = [
    trial(1, {
      hparams: { lr: 0.1, optimizer: { name: 'sgd', momentum: 0.9 } },
      steps_completed: 30,
      searcher_metric: 0.5,
      latest_validation: { steps_completed: 30, metrics: { loss: 0.6 }, report_time: '' }
    }),
    trial(2, {
      hparams: { lr: 0.01, optimizer: { name: 'adam' } },
      steps_completed: 10,
      searcher_metric: 0.2
    }),
    trial(3, { hparams: { lr: 0.05 }, steps_completed: 20 })
  ];

  test('nested hyperparameters flatten to dotted columns', () => {
    assert.deepEqual(flattenHparams({ a: 1, b: { c: 'x', d: { e: [1, 2] } } }), {
      a: 1,
      'b.c': 'x',
      'b.d.e': [1, 2]
    });
    assert.deepEqual(hparamColumns(trials), ['lr', 'optimizer.momentum', 'optimizer.name']);
  });

  test('sort by a hyperparameter both ways', () => {
    assert.deepEqual(
      sortTrials(trials, 'hp:lr', true, 'loss').map(t => t.id),
      [2, 3, 1]
    );
    assert.deepEqual(
      sortTrials(trials, 'hp:lr', false, 'loss').map(t => t.id),
      [1, 3, 2]
    );
  });

  test('missing values sort last in either direction', () => {
    assert.deepEqual(
      sortTrials(trials, 'best', true, 'loss').map(t => t.id),
      [2, 1, 3]
    );
    assert.deepEqual(
      sortTrials(trials, 'best', false, 'loss').map(t => t.id),
      [1, 2, 3]
    );
    assert.deepEqual(
      sortTrials(trials, 'hp:optimizer.momentum', false, 'loss').map(t => t.id),
      [1, 2, 3]
    );
  });

  test('sort by steps and state; strings compare naturally', () => {
    assert.deepEqual(
      sortTrials(trials, 'steps', true, 'loss').map(t => t.id),
      [2, 3, 1]
    );
    const named = [
      trial(1, { state: 'PAUSED' }),
      trial(2, { state: 'ACTIVE' }),
      trial(3, { state: 'COMPLETED' })
    ];
    assert.deepEqual(
      sortTrials(named, 'state', true, 'loss').map(t => t.id),
      [2, 3, 1]
    );
  });

  test('best metric reads the best validation of the trial, else its searcher_metric', () => {
    const t = trial(9, {
      best_validation: { steps_completed: 5, metrics: { loss: 0.3 }, report_time: '' }
    });
    assert.equal(bestSearcherMetric(t, 'loss'), 0.3);
    assert.equal(bestSearcherMetric(trial(10), 'loss'), null);
  });
});

describe('charts', () => {
  test('metric names are the numeric ones only', () => {
    const reports = [
      report(1, 1, 1, { loss: 1, acc: 0.5, note: 'x' }),
      report(2, 1, 2, { lr: 0.1 })
    ];
    assert.deepEqual(metricNames(reports), ['acc', 'loss', 'lr']);
  });

  test('series of several trials align on the union of steps, undefined where not reported', () => {
    const byTrial = new Map<number, IMetricReport[]>([
      [1, [report(1, 1, 10, { loss: 1.0 }), report(3, 1, 20, { loss: 0.8 })]],
      [
        2,
        [
          report(2, 2, 10, { loss: 2.0 }),
          report(4, 2, 30, { loss: 1.5 }),
          report(5, 2, 40, { acc: 1 })
        ]
      ]
    ]);
    assert.deepEqual(alignSeries(byTrial, [1, 2], 'loss'), {
      x: [10, 20, 30],
      // undefined: uPlot draws the line across (null is kept for a non-finite value's gap).
      ys: [
        [1.0, 0.8, undefined],
        [2.0, undefined, 1.5]
      ],
      nonFinite: []
    });
  });

  test('a replayed step keeps the latest report', () => {
    const byTrial = new Map([
      [1, [report(1, 1, 10, { loss: 1.0 }), report(2, 1, 10, { loss: 0.9 })]]
    ]);
    assert.deepEqual(alignSeries(byTrial, [1], 'loss'), {
      x: [10],
      ys: [[0.9]],
      nonFinite: []
    });
  });

  test('100,000 points of one trial align in order', () => {
    const reports: IMetricReport[] = [];
    for (let i = 0; i < 100000; i++) {
      reports.push(report(i + 1, 1, i + 1, { loss: 1 / (i + 1) }));
    }
    const aligned = alignSeries(new Map([[1, reports]]), [1], 'loss');
    assert.equal(aligned.x.length, 100000);
    assert.equal(aligned.ys[0][99999], 1 / 100000);
    assert.equal(aligned.x[0], 1);
  });

  test('scatter of a numeric hyperparameter against the best metric, sorted by x', () => {
    const trials = [
      trial(1, { hparams: { lr: 0.1 }, searcher_metric: 0.5 }),
      trial(2, { hparams: { lr: 0.01 }, searcher_metric: 0.2 }),
      trial(3, { hparams: { lr: 0.05 } })
    ];
    assert.deepEqual(hparamScatter(trials, 'lr', 'loss'), {
      points: [
        { trialId: 2, x: 0.01, y: 0.2 },
        { trialId: 1, x: 0.1, y: 0.5 }
      ],
      categories: null
    });
  });

  test('scatter of a categorical hyperparameter uses category indexes', () => {
    const trials = [
      trial(1, { hparams: { opt: 'sgd' }, searcher_metric: 0.5 }),
      trial(2, { hparams: { opt: 'adam' }, searcher_metric: 0.2 }),
      trial(3, { hparams: { opt: 'sgd' }, searcher_metric: 0.4 })
    ];
    const data = hparamScatter(trials, 'opt', 'loss');
    assert.deepEqual(data.categories, ['adam', 'sgd']);
    assert.deepEqual(data.points, [
      { trialId: 2, x: 0, y: 0.2 },
      { trialId: 1, x: 1, y: 0.5 },
      { trialId: 3, x: 1, y: 0.4 }
    ]);
  });
});

describe('logs', () => {
  test('levels come from the line, else from the stream', () => {
    assert.equal(logLevel(logLine(1, 'INFO: [1234] determined.core: hello')), 'INFO');
    assert.equal(logLevel(logLine(1, 'WARNING:root:careful')), 'WARNING');
    assert.equal(logLevel(logLine(1, '2026 [rank=0] ERROR something broke')), 'ERROR');
    assert.equal(logLevel(logLine(1, 'CRITICAL oh no')), 'ERROR');
    assert.equal(logLevel(logLine(1, 'DEBUG details')), 'DEBUG');
    assert.equal(logLevel(logLine(1, 'plain output')), 'INFO');
    assert.equal(logLevel(logLine(1, 'plain stderr', { stream: 'stderr' })), 'WARNING');
    assert.equal(
      logLevel(logLine(1, 'Traceback (most recent call last):', { stream: 'stderr' })),
      'ERROR'
    );
    assert.equal(logLevel(logLine(1, 'INFORMATION is not a level')), 'INFO');
  });

  test('filter by rank and minimum level', () => {
    const lines = [
      logLine(1, 'DEBUG a', { rank: 0 }),
      logLine(2, 'INFO b', { rank: 1 }),
      logLine(3, 'ERROR c', { rank: 0 }),
      logLine(4, 'WARNING d', { rank: 1 }),
      logLine(5, 'master says hi', { rank: null, stream: 'master' })
    ];
    assert.deepEqual(
      filterLogs(lines, { rank: null, minLevel: 'DEBUG' }).map(l => l.id),
      [1, 2, 3, 4, 5]
    );
    assert.deepEqual(
      filterLogs(lines, { rank: 0, minLevel: 'DEBUG' }).map(l => l.id),
      [1, 3]
    );
    assert.deepEqual(
      filterLogs(lines, { rank: null, minLevel: 'WARNING' }).map(l => l.id),
      [3, 4]
    );
    assert.deepEqual(
      filterLogs(lines, { rank: 1, minLevel: 'INFO' }).map(l => l.id),
      [2, 4]
    );
  });

  test('search keeps the lines containing the text, in any case', () => {
    const lines = [
      logLine(1, 'INFO epoch 1 loss 0.5'),
      logLine(2, 'ERROR CUDA out of memory', { trial_id: 2 }),
      logLine(3, 'INFO epoch 2 loss 0.4', { trial_id: 2 })
    ];
    const found = (search: string) =>
      filterLogs(lines, { rank: null, minLevel: 'DEBUG', search }).map(l => l.id);
    assert.deepEqual(found('cuda'), [2]);
    assert.deepEqual(found(' Loss '), [1, 3]);
    assert.deepEqual(found(''), [1, 2, 3]);
    // The all-trials view says which trial a line is from.
    assert.match(formatLogLine(lines[1], true), /^\[trial 2\] \[rank 0\] /);
    assert.doesNotMatch(formatLogLine(lines[1]), /trial/);
  });

  test('an all-trials buffer keeps the lines of the trials it accepts', () => {
    const trials = new Set([1, 2]);
    const buffer = new LogBuffer(null, 100, id => trials.has(id));
    buffer.add([
      logLine(3, 'b', { trial_id: 2 }),
      logLine(1, 'a', { trial_id: 1 }),
      logLine(2, 'other experiment', { trial_id: 9 })
    ]);
    assert.deepEqual(
      buffer.lines.map(l => l.id),
      [1, 3]
    );
    assert.equal(buffer.lastId, 3);
  });
});

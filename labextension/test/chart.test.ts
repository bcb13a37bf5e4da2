/**
 * Unit tests of the charts' decisions (chartMath.ts) and of the hyperparameter types that pick
 * a log axis (hparams.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  countPresent,
  formatTicks,
  logTicks,
  nearestPresent,
  paddedRange,
  showMarkers,
  stepRange
} from '../src/chart/chartMath';
import { hparamType, useLogAxis } from '../src/model/hparams';
import { DARK_PALETTE, LIGHT_PALETTE, rampColor, trialColor } from '../src/chart/theme';

describe('ranges', () => {
  test('a non-negative metric is never padded below 0', () => {
    const [lo, hi] = paddedRange(0.01, 0.9);
    assert.equal(lo, 0);
    assert.ok(hi > 0.9);
  });

  test('the data is inside the range, with a little room', () => {
    const [lo, hi] = paddedRange(2, 4);
    assert.ok(lo < 2 && lo > 1.8, String(lo));
    assert.ok(hi > 4 && hi < 4.2, String(hi));
  });

  test('negative data keeps its padding on both sides; a non-positive metric stays <= 0', () => {
    const [lo, hi] = paddedRange(-3, -1);
    assert.ok(lo < -3);
    assert.ok(hi <= 0);
    const [lo2, hi2] = paddedRange(-1, 1);
    assert.ok(lo2 < -1 && hi2 > 1);
  });

  test('a single value gets a window around it, and 0 a unit window', () => {
    assert.deepEqual(paddedRange(5, 5), [4.5, 5.5]);
    assert.deepEqual(paddedRange(0, 0), [0, 1]);
    const [lo, hi] = paddedRange(0.25, 0.25);
    assert.ok(lo >= 0 && lo < 0.25 && hi > 0.25);
  });

  test('no data at all is a unit range', () => {
    assert.deepEqual(paddedRange(null, null), [0, 1]);
    assert.deepEqual(paddedRange(Number.NaN, 3), [0, 1]);
  });

  test('log ranges pad by a factor and stay positive', () => {
    const [lo, hi] = paddedRange(1e-4, 1e-1, { log: true });
    assert.ok(lo > 0 && lo < 1e-4);
    assert.ok(hi > 1e-1);
    const [lo1, hi1] = paddedRange(1e-3, 1e-3, { log: true });
    assert.ok(lo1 > 0 && lo1 < 1e-3 && hi1 > 1e-3);
  });

  test('the step axis of a single step is a window around it, never below 0', () => {
    assert.deepEqual(stepRange(10, 10), [9, 11]);
    assert.deepEqual(stepRange(0, 0), [0, 1]);
    const [lo, hi] = stepRange(10, 110);
    assert.ok(Math.abs(lo - 8) < 1e-9 && Math.abs(hi - 112) < 1e-9, `${lo} ${hi}`);
    assert.equal(stepRange(0, 100)[0], 0);
  });
});

describe('ticks', () => {
  test('tiny values read 1e-4, not 0', () => {
    assert.deepEqual(formatTicks([0.0001, 0.0002, 0.0003]), ['1e-4', '2e-4', '3e-4']);
    assert.deepEqual(formatTicks([0.00015, 0.0002, 0.00025]), ['1.5e-4', '2e-4', '2.5e-4']);
  });

  test('ordinary values get as few decimals as keep them apart', () => {
    assert.deepEqual(formatTicks([0.2, 0.4, 0.6]), ['0.2', '0.4', '0.6']);
    assert.deepEqual(formatTicks([0, 50, 100]), ['0', '50', '100']);
    assert.deepEqual(formatTicks([1.25, 1.5, 1.75]), ['1.25', '1.5', '1.75']);
  });

  test('float noise is rounded away, and a near-zero tick is 0', () => {
    assert.deepEqual(formatTicks([0.1 + 0.2, 0.6000000000000001]), ['0.3', '0.6']);
    assert.deepEqual(formatTicks([-0.1, 5.551115123125783e-17, 0.1]), ['-0.1', '0', '0.1']);
  });

  test('huge values use exponents', () => {
    assert.deepEqual(formatTicks([1e6, 2e6, 3e6]), ['1e6', '2e6', '3e6']);
  });

  test('log ticks: powers of ten when the range holds several', () => {
    assert.deepEqual(logTicks(1e-5, 1e-1), [1e-5, 1e-4, 1e-3, 1e-2, 1e-1]);
    assert.deepEqual(formatTicks(logTicks(1e-5, 1e-1)), ['1e-5', '1e-4', '1e-3', '1e-2', '1e-1']);
  });

  test('log ticks: 1-2-5 inside a single decade, and never float noise', () => {
    const ticks = logTicks(2e-4, 3e-3);
    assert.deepEqual(ticks, [2e-4, 5e-4, 1e-3, 2e-3]);
    assert.ok(
      ticks.every(t => String(t).length < 8),
      String(ticks)
    );
  });

  test('log ticks: many decades are thinned', () => {
    const ticks = logTicks(1e-12, 1e12, 8);
    assert.ok(ticks.length <= 8 && ticks.length >= 4, String(ticks));
  });

  test('a tick uPlot filtered out (null) has an empty label, never "null"', () => {
    assert.deepEqual(formatTicks([null, 1e-4, null]), ['', '1e-4', '']);
    assert.deepEqual(formatTicks([null]), ['']);
  });

  test('log ticks: nothing for a range that is not positive', () => {
    assert.deepEqual(logTicks(0, 1), []);
  });
});

describe('markers for sparse series', () => {
  test('a single point is always drawn as a marker (a line needs two)', () => {
    assert.equal(showMarkers(1, 800), true);
    assert.equal(showMarkers(1, 10), true);
  });

  test('few points get markers, dense ones do not, none get nothing', () => {
    assert.equal(showMarkers(6, 600), true);
    assert.equal(showMarkers(1000, 600), false);
    assert.equal(showMarkers(0, 600), false);
  });

  test('present values are counted, gaps are not', () => {
    assert.equal(countPresent([null, 1, null, 2, undefined]), 2);
    assert.equal(countPresent([1, 2, 3, 4], 1, 2), 2);
  });
});

describe('hover on a shared step axis', () => {
  const xs = [10, 20, 30, 40, 50];
  test("the cursor's own point when present", () => {
    assert.equal(nearestPresent([1, 2, 3, 4, 5], xs, 2), 2);
  });

  test('else the nearest present point on either side', () => {
    assert.equal(nearestPresent([1, null, null, null, 5], xs, 1), 0);
    assert.equal(nearestPresent([1, null, null, null, 5], xs, 3), 4);
    assert.equal(nearestPresent([null, null, 3, null, null], xs, 0), 2);
  });

  test('a series with no value has no hover', () => {
    assert.equal(nearestPresent([null, null], [1, 2], 0), null);
  });
});

describe('log axis from the experiment config', () => {
  const config = {
    hyperparameters: {
      lr: { type: 'log', minval: -5, maxval: -1, base: 10 },
      layers: { type: 'int', minval: 1, maxval: 4 },
      optimizer: { type: 'categorical', vals: ['adam', 'sgd'] },
      dropout: 0.2,
      nested: {
        wd: { type: 'log', minval: -6, maxval: -2 },
        momentum: { type: 'double', minval: 0, maxval: 1 }
      }
    }
  };

  test('the type of each hyperparameter, nested ones by their dotted name', () => {
    assert.equal(hparamType(config, 'lr'), 'log');
    assert.equal(hparamType(config, 'layers'), 'int');
    assert.equal(hparamType(config, 'optimizer'), 'categorical');
    assert.equal(hparamType(config, 'dropout'), 'const');
    assert.equal(hparamType(config, 'nested.wd'), 'log');
    assert.equal(hparamType(config, 'nested.momentum'), 'double');
    assert.equal(hparamType(config, 'missing'), 'unknown');
    assert.equal(hparamType(config, 'lr.minval'), 'unknown');
    assert.equal(hparamType(undefined, 'lr'), 'unknown');
  });

  test('a log axis for a log hyperparameter with positive values only', () => {
    assert.equal(useLogAxis(config, 'lr', [1e-4, 3e-3]), true);
    assert.equal(useLogAxis(config, 'nested.wd', [1e-5]), true);
    assert.equal(useLogAxis(config, 'layers', [1, 2, 3]), false);
    assert.equal(useLogAxis(config, 'lr', [0, 1e-3]), false);
    assert.equal(useLogAxis(config, 'lr', []), false);
    assert.equal(useLogAxis(null, 'lr', [1e-4]), false);
  });
});

describe('theme colours', () => {
  test('a trial keeps its colour; each theme has its own palette', () => {
    assert.equal(trialColor(1, true), LIGHT_PALETTE[0]);
    assert.equal(trialColor(1, false), DARK_PALETTE[0]);
    assert.equal(trialColor(11, true), LIGHT_PALETTE[0]);
    assert.equal(trialColor(3, true), trialColor(3, true));
  });

  test('the metric ramp runs from worst to best, grey without a value', () => {
    assert.notEqual(rampColor(0, true), rampColor(1, true));
    assert.match(rampColor(0.5, false), /^rgb\(\d+, \d+, \d+\)$/);
    assert.equal(rampColor(Number.NaN, true), '#9e9e9e');
  });
});

/**
 * The search views' data (optuna-dashboard's optimisation history and contour): pure functions
 * of the trials and their best searcher metric.
 */
import { bestSearcherMetric, flattenHparams } from './trialTable';
import type { ITrial } from '../api/types';

export interface IHistory {
  /** The trials with a searcher metric, in the order they ended (running ones last). */
  trialIds: number[];
  /** Each trial's best searcher metric. */
  values: number[];
  /** The best value among this trial and all that ended before it. */
  bestSoFar: number[];
}

function endKey(trial: ITrial): number {
  // A running trial has no end yet: it goes after every ended one, by its start.
  const end = trial.end_time ? Date.parse(trial.end_time) : NaN;
  return Number.isFinite(end) ? end : Number.MAX_SAFE_INTEGER;
}

/**
 * The optimisation history: each trial's best searcher metric in the order the trials ended,
 * with the best so far (what the search had found by then).
 */
export function optimizationHistory(
  trials: Iterable<ITrial>,
  metric: string,
  smallerIsBetter = true
): IHistory {
  const rows: { trial: ITrial; value: number }[] = [];
  for (const trial of trials) {
    const value = bestSearcherMetric(trial, metric);
    if (value !== null) {
      rows.push({ trial, value });
    }
  }
  rows.sort(
    (a, b) =>
      endKey(a.trial) - endKey(b.trial) ||
      Date.parse(a.trial.start_time) - Date.parse(b.trial.start_time) ||
      a.trial.id - b.trial.id
  );
  const bestSoFar: number[] = [];
  let best = NaN;
  for (const { value } of rows) {
    if (Number.isNaN(best) || (smallerIsBetter ? value < best : value > best)) {
      best = value;
    }
    bestSoFar.push(best);
  }
  return {
    trialIds: rows.map(r => r.trial.id),
    values: rows.map(r => r.value),
    bestSoFar
  };
}

/** A point of the contour plot: one trial's two hyperparameters and its metric. */
export interface IContourPoint {
  trialId: number;
  x: number;
  y: number;
  value: number;
}

/** Trials with a searcher metric and numeric values of both hyperparameters. */
export function contourPoints(
  trials: Iterable<ITrial>,
  xName: string,
  yName: string,
  metric: string
): IContourPoint[] {
  const points: IContourPoint[] = [];
  for (const trial of trials) {
    const value = bestSearcherMetric(trial, metric);
    const flat = flattenHparams(trial.hparams);
    const x = flat[xName];
    const y = flat[yName];
    if (value !== null && typeof x === 'number' && typeof y === 'number') {
      points.push({ trialId: trial.id, x, y, value });
    }
  }
  return points;
}

export interface IGrid {
  /** cells[row][column]: the interpolated metric, row 0 at the lowest y. */
  cells: number[][];
  min: number;
  max: number;
  /** The span the grid covers, in axis units (exponents on a log axis): [low, high]. */
  xRange: [number, number];
  yRange: [number, number];
}

/** [low, high] of `values`, widened by `pad` of the span on each side. */
function span(values: number[], pad: number): [number, number] {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const extra = (hi - lo) * pad;
  return [lo - extra, hi + extra];
}

/**
 * The metric interpolated over a `size`×`size` grid spanning the points (inverse-distance
 * weighting in the unit square, so both hyperparameters count alike; `xLog`/`yLog` place a
 * log-sampled one by its exponent). A cell on a trial takes that trial's value. `pad`: the
 * grid reaches that fraction of the span beyond the outermost trials (so their dots sit inside).
 */
export function interpolateGrid(
  points: IContourPoint[],
  size: number,
  xLog = false,
  yLog = false,
  pad = 0
): IGrid {
  const tx = (v: number) => (xLog ? Math.log10(v) : v);
  const ty = (v: number) => (yLog ? Math.log10(v) : v);
  const xs = points.map(p => tx(p.x));
  const ys = points.map(p => ty(p.y));
  const [x0, x1] = span(xs, pad);
  const [y0, y1] = span(ys, pad);
  const nx = xs.map(x => (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5));
  const ny = ys.map(y => (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5));
  const cells: number[][] = [];
  let min = Infinity;
  let max = -Infinity;
  for (let row = 0; row < size; row++) {
    const cy = size > 1 ? row / (size - 1) : 0.5;
    const line: number[] = [];
    for (let col = 0; col < size; col++) {
      const cx = size > 1 ? col / (size - 1) : 0.5;
      let weights = 0;
      let sum = 0;
      let exact: number | null = null;
      for (let i = 0; i < points.length; i++) {
        const d2 = (nx[i] - cx) ** 2 + (ny[i] - cy) ** 2;
        if (d2 < 1e-12) {
          exact = points[i].value;
          break;
        }
        const w = 1 / (d2 * d2); // power 4: each trial dominates its neighbourhood
        weights += w;
        sum += w * points[i].value;
      }
      const value = exact ?? sum / weights;
      line.push(value);
      min = Math.min(min, value);
      max = Math.max(max, value);
    }
    cells.push(line);
  }
  return { cells, min, max, xRange: [x0, x1], yRange: [y0, y1] };
}

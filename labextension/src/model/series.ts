/** Chart data: metric names, aligned series, hyperparameter scatter. */
import { formatMetric } from './format';
import { bestSearcherMetric, flattenHparams } from './trialTable';
import type { IMetricReport, ITrial } from '../api/types';

/** Names of the numeric metrics in these reports, sorted. */
export function metricNames(reports: Iterable<IMetricReport>): string[] {
  const names = new Set<string>();
  for (const report of reports) {
    for (const [name, value] of Object.entries(report.metrics ?? {})) {
      if (typeof value === 'number') {
        names.add(name);
      }
    }
  }
  return [...names].sort();
}

/**
 * A point a trial reported as NaN or ±Infinity (a diverged run): drawn as a gap in its line
 * with a marker at its step, never as a number.
 */
export interface INonFinitePoint {
  /** The series (index into `ys`). */
  series: number;
  /** The step's index into `x`. */
  index: number;
  /** NaN, Infinity or -Infinity. */
  value: number;
}

/**
 * uPlot's aligned data: one x array (steps) and one y array per trial. A step a trial did not
 * report is `undefined` (uPlot draws the line across it); a non-finite value is `null` (uPlot
 * breaks the line there) and is listed in `nonFinite` for its marker.
 */
export interface IAlignedSeries {
  x: number[];
  ys: (number | null | undefined)[][];
  nonFinite: INonFinitePoint[];
}

/**
 * Align one metric of several trials on a shared, ascending step axis (what uPlot draws).
 * A trial that reported the same step twice (a restart replays steps) keeps the last report.
 * `xOf` places a report on another x axis (epochs, wall time); null leaves the report out.
 */
export function alignSeries(
  reportsByTrial: Map<number, IMetricReport[]>,
  trialIds: number[],
  metric: string,
  xOf: (report: IMetricReport) => number | null = report => report.steps_completed
): IAlignedSeries {
  const perTrial: Map<number, number>[] = [];
  const steps = new Set<number>();
  let anyNonFinite = false;
  for (const trialId of trialIds) {
    const points = new Map<number, number>();
    for (const report of reportsByTrial.get(trialId) ?? []) {
      const value = report.metrics?.[metric];
      const step = typeof value === 'number' ? xOf(report) : null;
      if (typeof value === 'number' && step !== null) {
        points.set(step, value);
        steps.add(step);
        anyNonFinite ||= !Number.isFinite(value);
      }
    }
    perTrial.push(points);
  }
  const x = [...steps].sort((a, b) => a - b);
  const nonFinite: INonFinitePoint[] = [];
  // null (a gap) for a non-finite value, undefined where the trial has no report.
  const place = (series: number, index: number, value: number | undefined) => {
    if (value === undefined || Number.isFinite(value)) {
      return value;
    }
    nonFinite.push({ series, index, value });
    return null;
  };
  if (trialIds.length === 1 && !anyNonFinite) {
    // One trial (the common case, and the 100k-point one): no union bookkeeping needed.
    const only = perTrial[0];
    return { x, ys: [x.map(step => only.get(step))], nonFinite };
  }
  const ys = perTrial.map((points, series) =>
    x.map((step, index) => place(series, index, points.get(step)))
  );
  return { x, ys, nonFinite };
}

/** One point of the hyperparameter-vs-metric view. */
export interface IScatterPoint {
  trialId: number;
  x: number;
  y: number;
}

export interface IScatterData {
  points: IScatterPoint[];
  /** For a categorical hyperparameter, the label of each integer x; null when numeric. */
  categories: string[] | null;
}

/**
 * Each trial's value of one hyperparameter against its best searcher metric. Trials without
 * a validation yet are left out. Non-numeric values become categories on an integer axis.
 */
export function hparamScatter(
  trials: Iterable<ITrial>,
  hparam: string,
  metric: string
): IScatterData {
  const rows: { trialId: number; raw: unknown; y: number }[] = [];
  let numeric = true;
  for (const trial of trials) {
    const y = bestSearcherMetric(trial, metric);
    const raw = flattenHparams(trial.hparams)[hparam];
    if (y === null || raw === undefined) {
      continue;
    }
    if (typeof raw !== 'number') {
      numeric = false;
    }
    rows.push({ trialId: trial.id, raw, y });
  }
  if (numeric) {
    const points = rows.map(r => ({ trialId: r.trialId, x: r.raw as number, y: r.y }));
    points.sort((a, b) => a.x - b.x || a.trialId - b.trialId);
    return { points, categories: null };
  }
  const categories = [...new Set(rows.map(r => formatMetric(r.raw)))].sort();
  const index = new Map(categories.map((c, i) => [c, i]));
  const points = rows.map(r => ({
    trialId: r.trialId,
    x: index.get(formatMetric(r.raw)) as number,
    y: r.y
  }));
  points.sort((a, b) => a.x - b.x || a.trialId - b.trialId);
  return { points, categories };
}

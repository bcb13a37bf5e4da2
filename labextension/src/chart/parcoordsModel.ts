/**
 * The model of the parallel coordinates (parcoords.ts draws it): one axis per hyperparameter
 * and one for the searcher metric (linear, log for log-sampled hyperparameters, categorical),
 * their ticks, and each trial's line and colour. Plain functions the unit tests run under node.
 */
import { formatTicks, logTicks } from './chartMath';
import { formatMetric } from '../model/format';
import { bestSearcherMetric, flattenHparams } from '../model/trialTable';
import { HparamType, hparamType } from '../model/hparams';
import type { ITrial } from '../api/types';

export type AxisKind = 'linear' | 'log' | 'categorical';

export interface IParcoordsAxis {
  /** `hp:<dotted name>` or `metric`. */
  key: string;
  label: string;
  kind: AxisKind;
  /** The smallest and largest value (numeric axes). */
  min: number;
  max: number;
  /** The categories, in axis order (categorical axes). */
  categories: string[];
}

export interface IParcoordsLine {
  trialId: number;
  /** Where the trial crosses each axis: 0 (bottom) .. 1 (top); null where it has no value. */
  positions: (number | null)[];
  metric: number | null;
  /** 0 (the worst metric) .. 1 (the best); NaN without a metric. */
  score: number;
}

export interface IParcoordsModel {
  axes: IParcoordsAxis[];
  lines: IParcoordsLine[];
  bestTrialId: number | null;
}

export interface ITick {
  pos: number;
  label: string;
}

function compareCategories(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') {
    return a - b;
  }
  return formatMetric(a).localeCompare(formatMetric(b), undefined, { numeric: true });
}

/**
 * An axis for these values: categorical when the config says so or a value is not a number,
 * log when the config says `log` and every value is positive, linear otherwise.
 */
export function axisFor(
  key: string,
  label: string,
  values: unknown[],
  type: HparamType = 'unknown'
): IParcoordsAxis {
  const present = values.filter(v => v !== undefined);
  const numeric = present.every(v => typeof v === 'number' && Number.isFinite(v));
  if (type === 'categorical' || !numeric) {
    const unique: unknown[] = [];
    const seen = new Set<string>();
    for (const value of present) {
      const text = formatMetric(value);
      if (!seen.has(text)) {
        seen.add(text);
        unique.push(value);
      }
    }
    unique.sort(compareCategories);
    return {
      key,
      label,
      kind: 'categorical',
      min: 0,
      max: Math.max(0, unique.length - 1),
      categories: unique.map(v => formatMetric(v))
    };
  }
  const numbers = present as number[];
  const min = numbers.length ? Math.min(...numbers) : 0;
  const max = numbers.length ? Math.max(...numbers) : 1;
  const kind: AxisKind = type === 'log' && numbers.length > 0 && min > 0 ? 'log' : 'linear';
  return { key, label, kind, min, max, categories: [] };
}

/** Where `value` sits on the axis: 0 (bottom) .. 1 (top), or null when it cannot be placed. */
export function axisPosition(axis: IParcoordsAxis, value: unknown): number | null {
  if (value === undefined || value === null) {
    return null;
  }
  if (axis.kind === 'categorical') {
    const index = axis.categories.indexOf(formatMetric(value));
    return index < 0 ? null : (index + 0.5) / axis.categories.length;
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return null;
  }
  if (axis.kind === 'log') {
    if (value <= 0) {
      return null;
    }
    const lo = Math.log10(axis.min);
    const hi = Math.log10(axis.max);
    return hi === lo ? 0.5 : (Math.log10(value) - lo) / (hi - lo);
  }
  return axis.max === axis.min ? 0.5 : (value - axis.min) / (axis.max - axis.min);
}

/** A 1-2-5 step that cuts `span` into about `count` parts. */
function niceStep(span: number, count: number): number {
  const raw = span / count;
  const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
  const fraction = raw / magnitude;
  const nice = fraction < 1.5 ? 1 : fraction < 3 ? 2 : fraction < 7 ? 5 : 10;
  return nice * magnitude;
}

/** The labelled ticks of an axis (positions 0..1, labels as short as stay distinct). */
export function axisTicks(axis: IParcoordsAxis, maxTicks = 5): ITick[] {
  if (axis.kind === 'categorical') {
    const n = axis.categories.length;
    const every = Math.max(1, Math.ceil(n / 10));
    return axis.categories
      .map((label, i) => ({ pos: (i + 0.5) / n, label }))
      .filter((_, i) => i % every === 0);
  }
  if (axis.min === axis.max) {
    return [{ pos: 0.5, label: formatTicks([axis.min])[0] }];
  }
  let values: number[];
  if (axis.kind === 'log') {
    values = logTicks(axis.min, axis.max, maxTicks);
    if (values.length < 2) {
      values = [axis.min, axis.max];
    }
  } else {
    const step = niceStep(axis.max - axis.min, maxTicks - 1);
    values = [];
    for (let v = Math.ceil(axis.min / step) * step; v <= axis.max + step * 1e-9; v += step) {
      values.push(Number(v.toPrecision(12)));
    }
    if (values.length < 2) {
      values = [axis.min, axis.max];
    }
  }
  const labels = formatTicks(values);
  return values
    .map((value, i) => ({ pos: axisPosition(axis, value) ?? 0, label: labels[i] }))
    .filter(tick => tick.pos >= -1e-9 && tick.pos <= 1 + 1e-9);
}

/**
 * The whole picture of a search: an axis per hyperparameter that varies (all of them when none
 * does), the metric axis last, and a line per trial, scored so 1 is the best metric.
 */
export function parcoordsModel(
  trials: Iterable<ITrial>,
  hparams: string[],
  metric: string,
  config: Record<string, unknown> | null | undefined,
  smallerIsBetter = true
): IParcoordsModel {
  const rows = [...trials].map(trial => ({
    trial,
    flat: flattenHparams(trial.hparams),
    metric: bestSearcherMetric(trial, metric)
  }));
  const varying = hparams.filter(
    name => new Set(rows.map(r => formatMetric(r.flat[name]))).size > 1
  );
  const shown = varying.length ? varying : hparams;
  const axes = shown.map(name =>
    axisFor(
      `hp:${name}`,
      name,
      rows.map(r => r.flat[name]),
      hparamType(config, name)
    )
  );
  const metrics = rows
    .map(r => r.metric)
    .filter((v): v is number => v !== null && Number.isFinite(v));
  axes.push(axisFor('metric', `best ${metric}`, metrics));
  const lo = metrics.length ? Math.min(...metrics) : 0;
  const hi = metrics.length ? Math.max(...metrics) : 0;
  let bestTrialId: number | null = null;
  let bestScore = -1;
  const lines = rows.map(({ trial, flat, metric: value }) => {
    const positions = axes.map(axis =>
      axisPosition(axis, axis.key === 'metric' ? value : flat[axis.key.slice(3)])
    );
    let score = Number.NaN;
    if (value !== null && Number.isFinite(value)) {
      score = hi === lo ? 1 : smallerIsBetter ? (hi - value) / (hi - lo) : (value - lo) / (hi - lo);
      if (
        score > bestScore ||
        (score === bestScore && bestTrialId !== null && trial.id < bestTrialId)
      ) {
        bestScore = score;
        bestTrialId = trial.id;
      }
    }
    return { trialId: trial.id, positions, metric: value, score };
  });
  return { axes, lines, bestTrialId };
}

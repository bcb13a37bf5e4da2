/** The trials table's data: flattened hyperparameters, searcher metrics, best trial, sorting. */
import { trialDisplayState } from './states';
import type { IExperiment, ITrial } from '../api/types';

/** Nested hyperparameters as dotted keys: `{optimizer: {lr: 0.1}}` -> `{"optimizer.lr": 0.1}`. */
export function flattenHparams(
  hparams: Record<string, unknown> | null | undefined,
  prefix = ''
): Record<string, unknown> {
  const flat: Record<string, unknown> = {};
  if (!hparams) {
    return flat;
  }
  for (const [key, value] of Object.entries(hparams)) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      Object.assign(flat, flattenHparams(value as Record<string, unknown>, name));
    } else {
      flat[name] = value;
    }
  }
  return flat;
}

/** Every hyperparameter name of these trials, sorted: the table's hparam columns. */
export function hparamColumns(trials: Iterable<ITrial>): string[] {
  const names = new Set<string>();
  for (const trial of trials) {
    for (const name of Object.keys(flattenHparams(trial.hparams))) {
      names.add(name);
    }
  }
  return [...names].sort();
}

/** A sortable column: a fixed field or `hp:<dotted name>`. */
export type TrialSortKey = 'id' | 'state' | 'steps' | 'restarts' | 'latest' | 'best' | string;

/** The searcher metric of a trial's latest validation, or null. */
export function latestSearcherMetric(trial: ITrial, metric: string): number | null {
  const value = trial.latest_validation?.metrics?.[metric];
  return typeof value === 'number' ? value : null;
}

/**
 * The searcher metric of a trial's best validation, or null. A NaN/Infinity (a diverged run)
 * is never a best, as the master never picks one: null.
 */
export function bestSearcherMetric(trial: ITrial, metric: string): number | null {
  const value = trial.best_validation?.metrics?.[metric];
  if (typeof value === 'number' && Number.isFinite(value)) {
    return value;
  }
  const fallback = trial.searcher_metric;
  return typeof fallback === 'number' && Number.isFinite(fallback) ? fallback : null;
}

/**
 * The trial with the best searcher metric (by its best validation), or null when none has
 * one yet; ties go to the lower id.
 */
export function bestTrialId(
  trials: Iterable<ITrial>,
  metric: string,
  smallerIsBetter = true
): number | null {
  let bestId: number | null = null;
  let bestValue = 0;
  for (const trial of trials) {
    const value = bestSearcherMetric(trial, metric);
    if (value === null || Number.isNaN(value)) {
      continue;
    }
    const better =
      bestId === null ||
      (smallerIsBetter ? value < bestValue : value > bestValue) ||
      (value === bestValue && trial.id < bestId);
    if (better) {
      bestId = trial.id;
      bestValue = value;
    }
  }
  return bestId;
}

/**
 * The trials plotted until the user picks: all of them when there are few, else the `limit`
 * with the best searcher metric (then the lowest ids), so the best trial is always drawn.
 */
export function defaultPlottedTrials(
  trials: Iterable<ITrial>,
  metric: string,
  smallerIsBetter = true,
  limit = 8
): number[] {
  const all = [...trials];
  if (all.length <= limit) {
    return all.map(t => t.id).sort((a, b) => a - b);
  }
  const ranked = sortTrials(all, 'best', smallerIsBetter, metric);
  return ranked
    .slice(0, limit)
    .map(t => t.id)
    .sort((a, b) => a - b);
}

function sortValue(trial: ITrial, key: TrialSortKey, metric: string): unknown {
  switch (key) {
    case 'id':
      return trial.id;
    case 'state':
      return trialDisplayState(trial);
    case 'steps':
      return trial.steps_completed;
    case 'restarts':
      return trial.restarts;
    case 'latest':
      return latestSearcherMetric(trial, metric);
    case 'best':
      return bestSearcherMetric(trial, metric);
    default:
      if (key.startsWith('hp:')) {
        return flattenHparams(trial.hparams)[key.slice(3)];
      }
      return undefined;
  }
}

function compareValues(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') {
    // Not a - b: Infinity - Infinity is NaN, which breaks the sort.
    return a < b ? -1 : a > b ? 1 : 0;
  }
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

/**
 * Trials sorted by a column; missing values (no validation yet) always go last whatever the
 * direction, and ties keep id order so the table does not jump around on live updates.
 */
export function sortTrials(
  trials: Iterable<ITrial>,
  key: TrialSortKey,
  ascending: boolean,
  metric: string
): ITrial[] {
  const rows = [...trials];
  rows.sort((x, y) => {
    const a = sortValue(x, key, metric);
    const b = sortValue(y, key, metric);
    // NaN (a diverged latest validation) has no order: last, with the missing ones.
    const aMissing = a === null || a === undefined || Number.isNaN(a);
    const bMissing = b === null || b === undefined || Number.isNaN(b);
    if (aMissing || bMissing) {
      return aMissing === bMissing ? x.id - y.id : aMissing ? 1 : -1;
    }
    const order = compareValues(a, b);
    if (order === 0) {
      return x.id - y.id;
    }
    return ascending ? order : -order;
  });
  return rows;
}

/**
 * The experiment's best validation after this trial update, or null when it does not improve.
 *
 * The master publishes an experiment event on progress and state changes but not when a
 * validation improves the best metric; the trial event that carries the new validation does
 * arrive, so the list folds it in rather than showing a stale best until the next progress.
 */
export function improvedBest(experiment: IExperiment, trial: ITrial): number | null {
  const metric = experiment.searcher?.metric;
  if (!metric || trial.experiment_id !== experiment.id) {
    return null;
  }
  const candidate = bestSearcherMetric(trial, metric);
  if (candidate === null) {
    return null;
  }
  const current = experiment.best_validation;
  if (current === null || current === undefined) {
    return candidate;
  }
  const smaller = experiment.searcher.smaller_is_better !== false;
  return (smaller ? candidate < current : candidate > current) ? candidate : null;
}

/**
 * Hyperparameter importance as optuna-dashboard shows it: a random forest of regression trees
 * fitted to (hyperparameters -> best searcher metric), each hyperparameter's importance the
 * share of the metric's variance its splits explain (mean decrease in impurity), summing to 1.
 *
 * It runs in the browser, not on the master: the trials and their best metrics are already
 * here (a saved notebook's snapshot too, with no master), a search has at most a few hundred
 * trials (64 small trees take milliseconds), and a seeded generator makes the same trials give
 * the same bars on every redraw.
 */
import { bestSearcherMetric, flattenHparams } from './trialTable';
import { formatMetric } from './format';
import type { ITrial } from '../api/types';

export interface IImportance {
  hparam: string;
  /** Share of the explained variance, 0..1; the shares sum to 1 (or are all 0). */
  importance: number;
}

export interface IForestOptions {
  trees?: number;
  maxDepth?: number;
  /** A node with fewer samples is a leaf. */
  minSplit?: number;
  seed?: number;
}

/** A small deterministic generator (mulberry32): the same forest on every redraw. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function sumSquares(ys: number[], rows: number[]): number {
  let sum = 0;
  for (const r of rows) {
    sum += ys[r];
  }
  const mean = sum / rows.length;
  let sse = 0;
  for (const r of rows) {
    sse += (ys[r] - mean) ** 2;
  }
  return sse;
}

/** The best split of `rows` on one feature: [SSE after, threshold], or null (no split). */
function bestSplit(
  column: number[],
  ys: number[],
  rows: number[]
): { sse: number; threshold: number } | null {
  const sorted = [...rows].sort((a, b) => column[a] - column[b]);
  const n = sorted.length;
  let leftSum = 0;
  let leftSq = 0;
  let totalSum = 0;
  let totalSq = 0;
  for (const r of sorted) {
    totalSum += ys[r];
    totalSq += ys[r] * ys[r];
  }
  let best: { sse: number; threshold: number } | null = null;
  for (let i = 0; i < n - 1; i++) {
    const y = ys[sorted[i]];
    leftSum += y;
    leftSq += y * y;
    const here = column[sorted[i]];
    const next = column[sorted[i + 1]];
    if (here === next) {
      continue; // no threshold between equal values
    }
    const nl = i + 1;
    const nr = n - nl;
    const rightSum = totalSum - leftSum;
    const sse = leftSq - (leftSum * leftSum) / nl + (totalSq - leftSq) - (rightSum * rightSum) / nr;
    if (!best || sse < best.sse) {
      best = { sse, threshold: (here + next) / 2 };
    }
  }
  return best;
}

/** Grow one tree on `rows`, adding each split's decrease in SSE to its feature's total. */
function growTree(
  columns: number[][],
  ys: number[],
  rows: number[],
  depth: number,
  options: Required<IForestOptions>,
  decrease: number[],
  random: () => number
): void {
  if (depth >= options.maxDepth || rows.length < options.minSplit) {
    return;
  }
  const parent = sumSquares(ys, rows);
  if (parent <= 1e-12 * rows.length) {
    return; // a pure node
  }
  // Every feature's best split; among equally good ones (with few trials, several
  // hyperparameters often separate the same trials) one at random, so that no hyperparameter
  // wins ties by its name's place in the alphabet.
  const splits: { feature: number; sse: number; threshold: number }[] = [];
  columns.forEach((column, feature) => {
    const split = bestSplit(column, ys, rows);
    if (split) {
      splits.push({ feature, ...split });
    }
  });
  if (!splits.length) {
    return;
  }
  const lowest = Math.min(...splits.map(s => s.sse));
  const tied = splits.filter(s => s.sse <= lowest + 1e-9 * parent);
  const { feature, sse, threshold } = tied[Math.floor(random() * tied.length)];
  decrease[feature] += Math.max(0, parent - sse);
  const column = columns[feature];
  grow(rows.filter(r => column[r] <= threshold));
  grow(rows.filter(r => column[r] > threshold));

  function grow(part: number[]): void {
    growTree(columns, ys, part, depth + 1, options, decrease, random);
  }
}

/**
 * Importance of each feature column for predicting `ys` (one row per trial), by a bagged
 * forest's mean decrease in impurity, normalised to sum to 1 (all 0 when nothing varies).
 */
export function forestImportance(
  columns: number[][],
  ys: number[],
  options: IForestOptions = {}
): number[] {
  const settings: Required<IForestOptions> = {
    trees: options.trees ?? 64,
    maxDepth: options.maxDepth ?? 6,
    minSplit: options.minSplit ?? 2,
    seed: options.seed ?? 1
  };
  const random = seededRandom(settings.seed);
  const decrease = columns.map(() => 0);
  const n = ys.length;
  for (let t = 0; t < settings.trees; t++) {
    // A bootstrap sample: each tree sees a different resampling of the trials.
    const rows = Array.from({ length: n }, () => Math.floor(random() * n));
    growTree(columns, ys, rows, 0, settings, decrease, random);
  }
  const total = decrease.reduce((a, b) => a + b, 0);
  return decrease.map(d => (total > 0 ? d / total : 0));
}

/**
 * Importance of each hyperparameter for the searcher metric over the trials that reported it
 * (numbers as they are; other values as categories), most important first. Fewer than three
 * such trials, or no hyperparameter that varies: an empty list.
 */
export function hparamImportance(
  trials: Iterable<ITrial>,
  hparams: string[],
  metric: string
): IImportance[] {
  const rows: { flat: Record<string, unknown>; y: number }[] = [];
  for (const trial of trials) {
    const y = bestSearcherMetric(trial, metric);
    if (y !== null) {
      rows.push({ flat: flattenHparams(trial.hparams), y });
    }
  }
  const varying: string[] = [];
  const columns: number[][] = [];
  for (const name of hparams) {
    const raw = rows.map(r => r.flat[name]);
    const numeric = raw.every(v => typeof v === 'number' && Number.isFinite(v));
    let column: number[];
    if (numeric) {
      column = raw as number[];
    } else {
      // Categories in sorted order: a tree splits them as ordered codes.
      const labels = [...new Set(raw.map(v => formatMetric(v)))].sort();
      column = raw.map(v => labels.indexOf(formatMetric(v)));
    }
    if (new Set(column).size > 1) {
      varying.push(name);
      columns.push(column);
    }
  }
  if (rows.length < 3 || !varying.length) {
    return [];
  }
  const shares = forestImportance(
    columns,
    rows.map(r => r.y)
  );
  return varying
    .map((hparam, i) => ({ hparam, importance: shares[i] }))
    .sort((a, b) => b.importance - a.importance || a.hparam.localeCompare(b.hparam));
}

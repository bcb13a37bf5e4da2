/**
 * Pure data and formatting helpers for the sidebar and the experiment view.
 *
 * Nothing here touches the DOM or JupyterLab, so the unit tests (`jlpm test`) run them under
 * plain node.
 */
import type { IExperiment, ILogLine, IMetricReport, ITrial } from './types';

const TERMINAL_STATES = new Set(['COMPLETED', 'CANCELED', 'ERROR']);

/** True once an experiment or trial can no longer change state. */
export function isTerminal(state: string): boolean {
  return TERMINAL_STATES.has(state);
}

/** The colour family of a state, used as a CSS modifier (`jp-Det-state-<category>`). */
export function stateCategory(state: string): string {
  if (state === 'ACTIVE' || state === 'RUNNING') {
    return 'active';
  }
  if (state === 'QUEUED') {
    return 'queued';
  }
  if (state === 'PAUSED') {
    return 'paused';
  }
  if (state.startsWith('STOPPING')) {
    return 'stopping';
  }
  if (state === 'COMPLETED') {
    return 'completed';
  }
  if (state === 'CANCELED') {
    return 'canceled';
  }
  if (state === 'ERROR') {
    return 'error';
  }
  return 'unknown';
}

/**
 * The state a trial shows: an ACTIVE trial still waiting for slots reads QUEUED (the master's
 * `run_state`), so a search that runs 2 of 6 trials does not look like 6 running ones.
 */
export function trialDisplayState(trial: Pick<ITrial, 'state' | 'run_state'>): string {
  if (trial.state === 'ACTIVE' && trial.run_state === 'QUEUED') {
    return 'QUEUED';
  }
  return trial.state;
}

/**
 * The fraction a progress bar shows: a COMPLETED experiment or trial is done whatever its
 * last reported progress said (the searcher may finish early, and the master does not
 * rewrite the last progress at completion); anything else shows what was reported, clamped.
 */
export function displayProgress(state: string, progress: number | null | undefined): number | null {
  if (state === 'COMPLETED') {
    return 1;
  }
  if (typeof progress !== 'number' || !Number.isFinite(progress)) {
    return null;
  }
  return Math.min(1, Math.max(0, progress));
}

/** The one-line reason a trial ended badly (shown for ERROR and CANCELED trials), or ''. */
export function trialExitNote(trial: Pick<ITrial, 'state' | 'exit_summary' | 'exit_code'>): string {
  if (trial.state !== 'ERROR' && trial.state !== 'CANCELED') {
    return '';
  }
  if (trial.exit_summary) {
    return trial.exit_summary;
  }
  if (trial.state === 'ERROR' && typeof trial.exit_code === 'number') {
    return `exited with code ${trial.exit_code}`;
  }
  return '';
}

/** How many of these trials hold slots and how many wait for them (for a one-line summary). */
export function runCounts(trials: Iterable<Pick<ITrial, 'state' | 'run_state'>>): {
  running: number;
  queued: number;
} {
  let running = 0;
  let queued = 0;
  for (const trial of trials) {
    const state = trialDisplayState(trial);
    if (state === 'QUEUED') {
      queued += 1;
    } else if (state === 'ACTIVE') {
      running += 1;
    }
  }
  return { running, queued };
}

/** `0.4567` -> `"46%"`; anything not a finite number -> `"—"`. */
export function formatPercent(fraction: number | null | undefined): string {
  if (typeof fraction !== 'number' || !Number.isFinite(fraction)) {
    return '—';
  }
  const clamped = Math.min(1, Math.max(0, fraction));
  return `${Math.round(clamped * 100)}%`;
}

/** `"1.500e-4"` -> `"1.5e-4"`, `"2.000e+6"` -> `"2e6"`. */
function tidyExponent(text: string): string {
  const [mantissa, exponent] = text.split('e');
  const tidy = mantissa.includes('.') ? mantissa.replace(/0+$/, '').replace(/\.$/, '') : mantissa;
  return exponent === undefined ? tidy : `${tidy}e${exponent.replace(/^\+/, '')}`;
}

/**
 * A number for people: at most `digits` significant digits, exponent form for tiny
 * (< 0.001) and huge (>= 1e6) magnitudes, no trailing zeros: `0.30000000000000004` -> `0.3`,
 * `0.000123456` -> `1.235e-4`, `1234567.8` -> `1.235e6`. Integers below 1e9 stay exact
 * (steps, ids, batch sizes).
 */
export function formatNumber(value: number, digits = 4): string {
  if (!Number.isFinite(value)) {
    return String(value);
  }
  if (Number.isInteger(value) && Math.abs(value) < 1e9) {
    return String(value);
  }
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) {
    return tidyExponent(value.toExponential(digits - 1));
  }
  const rounded = Number(value.toPrecision(digits));
  // toPrecision may round up into the next magnitude (999999.9 -> 1e6): keep the rule.
  if (Math.abs(rounded) >= 1e6) {
    return tidyExponent(rounded.toExponential(digits - 1));
  }
  return String(rounded);
}

/** A metric value in at most 4 significant digits; integers stay integers. */
export function formatMetric(value: unknown): string {
  if (value === null || value === undefined) {
    return '—';
  }
  if (typeof value === 'number') {
    return formatNumber(value);
  }
  if (typeof value === 'string' || typeof value === 'boolean') {
    return String(value);
  }
  return JSON.stringify(value);
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/**
 * A start time for a list: `HH:MM:SS` when it is today (in local time), else `YYYY-MM-DD HH:MM`.
 * An unparsable time is shown as it came, so a server bug stays visible instead of blank.
 */
export function formatStartTime(iso: string | null | undefined, now: Date = new Date()): string {
  if (!iso) {
    return '—';
  }
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) {
    return String(iso);
  }
  const time = `${pad2(when.getHours())}:${pad2(when.getMinutes())}`;
  const sameDay =
    when.getFullYear() === now.getFullYear() &&
    when.getMonth() === now.getMonth() &&
    when.getDate() === now.getDate();
  if (sameDay) {
    return `${time}:${pad2(when.getSeconds())}`;
  }
  return `${when.getFullYear()}-${pad2(when.getMonth() + 1)}-${pad2(when.getDate())} ${time}`;
}

/** Seconds -> `"1h 02m"`, `"3m 05s"`, `"42s"`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) {
    return '—';
  }
  const s = Math.floor(seconds);
  if (s < 60) {
    return `${s}s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)}m ${pad2(s % 60)}s`;
  }
  return `${Math.floor(s / 3600)}h ${pad2(Math.floor((s % 3600) / 60))}m`;
}

/** Bytes in binary units: `1536` -> `"1.5 KiB"`. */
export function formatBytes(bytes: number | null | undefined): string {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes) || bytes < 0) {
    return '—';
  }
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

// ---------------------------------------------------------------------------------------------
// Experiment list

export interface IExperimentFilter {
  /** An experiment state, or '' for all. */
  state: string;
  /** Case-insensitive substring of the name (or the id as digits). */
  name: string;
  showArchived: boolean;
}

export const NO_FILTER: IExperimentFilter = { state: '', name: '', showArchived: false };

/** The experiments the list shows, newest first. */
export function filterExperiments(
  experiments: Iterable<IExperiment>,
  filter: IExperimentFilter
): IExperiment[] {
  const needle = filter.name.trim().toLowerCase();
  const kept: IExperiment[] = [];
  for (const experiment of experiments) {
    if (!filter.showArchived && experiment.archived) {
      continue;
    }
    if (filter.state && experiment.state !== filter.state) {
      continue;
    }
    if (
      needle &&
      !(experiment.name ?? '').toLowerCase().includes(needle) &&
      String(experiment.id) !== needle
    ) {
      continue;
    }
    kept.push(experiment);
  }
  kept.sort((a, b) => b.id - a.id);
  return kept;
}

export type ExperimentAction = 'pause' | 'activate' | 'kill' | 'archive' | 'unarchive';

/** The actions the master accepts in this state (the others answer 409). */
export function allowedActions(
  experiment: Pick<IExperiment, 'state' | 'archived'>
): Set<ExperimentAction> {
  const actions = new Set<ExperimentAction>();
  const state = experiment.state;
  if (state === 'ACTIVE') {
    actions.add('pause');
  }
  if (state === 'PAUSED') {
    actions.add('activate');
  }
  if (!isTerminal(state)) {
    actions.add('kill');
  } else if (experiment.archived) {
    actions.add('unarchive');
  } else {
    actions.add('archive');
  }
  return actions;
}

// ---------------------------------------------------------------------------------------------
// Trials table

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

/** The searcher metric of a trial's best validation, or null. */
export function bestSearcherMetric(trial: ITrial, metric: string): number | null {
  const value = trial.best_validation?.metrics?.[metric];
  if (typeof value === 'number') {
    return value;
  }
  return typeof trial.searcher_metric === 'number' ? trial.searcher_metric : null;
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
    return a - b;
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
    const aMissing = a === null || a === undefined;
    const bMissing = b === null || b === undefined;
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

// ---------------------------------------------------------------------------------------------
// Charts

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

/** uPlot's aligned data: one x array (steps) and one y array per trial, null where absent. */
export interface IAlignedSeries {
  x: number[];
  ys: (number | null)[][];
}

/**
 * Align one metric of several trials on a shared, ascending step axis (what uPlot draws).
 * A trial that reported the same step twice (a restart replays steps) keeps the last report.
 */
export function alignSeries(
  reportsByTrial: Map<number, IMetricReport[]>,
  trialIds: number[],
  metric: string
): IAlignedSeries {
  const perTrial: Map<number, number>[] = [];
  const steps = new Set<number>();
  for (const trialId of trialIds) {
    const points = new Map<number, number>();
    for (const report of reportsByTrial.get(trialId) ?? []) {
      const value = report.metrics?.[metric];
      if (typeof value === 'number') {
        points.set(report.steps_completed, value);
        steps.add(report.steps_completed);
      }
    }
    perTrial.push(points);
  }
  const x = [...steps].sort((a, b) => a - b);
  if (trialIds.length === 1) {
    // One trial (the common case, and the 100k-point one): no union bookkeeping needed.
    const only = perTrial[0];
    return { x, ys: [x.map(step => only.get(step) ?? null)] };
  }
  const ys = perTrial.map(points => x.map(step => points.get(step) ?? null));
  return { x, ys };
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

// ---------------------------------------------------------------------------------------------
// Logs

export const LOG_LEVELS = ['DEBUG', 'INFO', 'WARNING', 'ERROR'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const LEVEL_PATTERN = /\b(DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\b/;

/**
 * The level of a log line, from the usual `LEVEL` word in it (Python logging, the harness's
 * LOG_FORMAT); a line without one is INFO on stdout and WARNING on stderr... unless it is a
 * traceback, which reads as ERROR.
 */
export function logLevel(line: Pick<ILogLine, 'line' | 'stream'>): LogLevel {
  const match = LEVEL_PATTERN.exec(line.line.slice(0, 200));
  if (match) {
    const word = match[1];
    if (word === 'WARN' || word === 'WARNING') {
      return 'WARNING';
    }
    if (word === 'CRITICAL' || word === 'FATAL' || word === 'ERROR') {
      return 'ERROR';
    }
    return word as LogLevel;
  }
  if (line.line.startsWith('Traceback (most recent call last)')) {
    return 'ERROR';
  }
  return line.stream === 'stderr' ? 'WARNING' : 'INFO';
}

export interface ILogFilter {
  /** A rank, or null for all ranks. */
  rank: number | null;
  /** The lowest level shown. */
  minLevel: LogLevel;
}

/** The lines that pass the rank and level filter, in order. */
export function filterLogs(lines: Iterable<ILogLine>, filter: ILogFilter): ILogLine[] {
  const floor = LOG_LEVELS.indexOf(filter.minLevel);
  const kept: ILogLine[] = [];
  for (const line of lines) {
    if (filter.rank !== null && line.rank !== filter.rank) {
      continue;
    }
    if (LOG_LEVELS.indexOf(logLevel(line)) < floor) {
      continue;
    }
    kept.push(line);
  }
  return kept;
}

/** One log line as the viewer prints it: `[rank 0] 01:02:03 text`. */
export function formatLogLine(line: ILogLine): string {
  const time = formatStartTime(line.time, new Date(line.time));
  const rank = line.rank === null || line.rank === undefined ? '' : `[rank ${line.rank}] `;
  return `${rank}${time} ${line.line}`;
}

/**
 * The sidebar's experiment table: its columns, sorting, filtering, labels parsing and which
 * selected experiments a bulk action applies to. Pure (no DOM), tested under plain node, so
 * the view only renders what these functions answer — a thousand experiments sort in a few
 * milliseconds because every key is computed once per experiment, not once per comparison.
 */
import { ExperimentAction, allowedActions, isTerminal } from './states';
import type { IExperiment } from '../api/types';

/** The columns the table can sort by. */
export type SortKey = 'id' | 'name' | 'state' | 'owner' | 'best' | 'duration' | 'labels';
export type SortDirection = 'asc' | 'desc';

export interface ISort {
  key: SortKey;
  direction: SortDirection;
}

/** Newest first, as the list always was. */
export const DEFAULT_SORT: ISort = { key: 'id', direction: 'desc' };

/** The direction a column sorts in on its first click: numbers that grow read best high. */
export function firstDirection(key: SortKey): SortDirection {
  return key === 'id' || key === 'duration' ? 'desc' : 'asc';
}

/** The sort after a click on a column header: the same column flips, another starts fresh. */
export function nextSort(current: ISort, key: SortKey): ISort {
  if (current.key === key) {
    return { key, direction: current.direction === 'asc' ? 'desc' : 'asc' };
  }
  return { key, direction: firstDirection(key) };
}

/**
 * Who owns an experiment, when the master says so (an `owner` or `username` field); '' when
 * it does not.
 */
export function experimentOwner(experiment: IExperiment): string {
  const record = experiment as unknown as Record<string, unknown>;
  for (const field of ['owner', 'username', 'user']) {
    const value = record[field];
    if (typeof value === 'string' && value) {
      return value;
    }
    if (value && typeof value === 'object') {
      const name = (value as Record<string, unknown>).username;
      if (typeof name === 'string' && name) {
        return name;
      }
    }
  }
  return '';
}

/**
 * True when the experiments belong to more than one user (then the table shows a "User"
 * column). Every experiment names its owner (docs/team.md); one person's master has one owner,
 * whose name in every row would tell nothing.
 */
export function hasOwners(experiments: Iterable<IExperiment>): boolean {
  let first: string | undefined;
  for (const experiment of experiments) {
    const owner = experimentOwner(experiment);
    if (!owner) {
      continue;
    }
    if (first === undefined) {
      first = owner;
    } else if (owner !== first) {
      return true;
    }
  }
  return false;
}

/** Seconds from start to end (or to `now` while it runs); null without a readable start. */
export function durationSeconds(
  experiment: Pick<IExperiment, 'start_time' | 'end_time' | 'state'>,
  now: number = Date.now()
): number | null {
  const start = Date.parse(experiment.start_time ?? '');
  if (!Number.isFinite(start)) {
    return null;
  }
  const endText = experiment.end_time;
  let end = endText ? Date.parse(endText) : NaN;
  if (!Number.isFinite(end)) {
    // A finished experiment without an end time has no honest duration.
    if (isTerminal(experiment.state)) {
      return null;
    }
    end = now;
  }
  return Math.max(0, (end - start) / 1000);
}

/** An experiment's labels (a missing or odd field reads as none). */
export function labelsOf(experiment: Pick<IExperiment, 'labels'>): string[] {
  const labels = experiment.labels;
  return Array.isArray(labels) ? labels.filter(l => typeof l === 'string') : [];
}

/**
 * Labels typed as text: separated by commas (or new lines), trimmed, empty ones and repeats
 * dropped, in the order typed — what PATCH /experiments/{id} stores.
 */
export function parseLabels(text: string): string[] {
  const seen = new Set<string>();
  const labels: string[] = [];
  for (const part of text.split(/[,\n]/)) {
    const label = part.trim();
    if (label && !seen.has(label)) {
      seen.add(label);
      labels.push(label);
    }
  }
  return labels;
}

/** The best validation as a sortable number; null when there is none (NaN included). */
function bestValue(experiment: IExperiment): number | null {
  const best = experiment.best_validation;
  return typeof best === 'number' && !Number.isNaN(best) ? best : null;
}

type KeyValue = number | string | null;

function sortValue(experiment: IExperiment, key: SortKey, now: number): KeyValue {
  switch (key) {
    case 'id':
      return experiment.id;
    case 'name':
      return (experiment.name ?? '').toLowerCase();
    case 'state':
      return experiment.state;
    case 'owner':
      return experimentOwner(experiment).toLowerCase() || null;
    case 'best':
      return bestValue(experiment);
    case 'duration':
      return durationSeconds(experiment, now);
    case 'labels':
      return labelsOf(experiment).join(', ').toLowerCase() || null;
  }
}

/**
 * The experiments in this order; ties (and experiments without the value, which always go
 * last whatever the direction) fall back to newest first. A new array; the input is untouched.
 */
export function sortExperiments(
  experiments: readonly IExperiment[],
  sort: ISort,
  now: number = Date.now()
): IExperiment[] {
  const sign = sort.direction === 'asc' ? 1 : -1;
  const keyed = experiments.map(experiment => ({
    experiment,
    value: sortValue(experiment, sort.key, now)
  }));
  keyed.sort((a, b) => {
    if (a.value !== b.value) {
      if (a.value === null) {
        return 1;
      }
      if (b.value === null) {
        return -1;
      }
      if (a.value < b.value) {
        return -sign;
      }
      if (a.value > b.value) {
        return sign;
      }
    }
    return b.experiment.id - a.experiment.id;
  });
  return keyed.map(entry => entry.experiment);
}

export interface ITableFilter {
  /** An experiment state, or '' for all. */
  state: string;
  /**
   * Words that must all match (case-insensitive): a word matches the name, a label, the
   * notes or the owner; digits alone also match the id; `label:x` only matches a label.
   */
  text: string;
  showArchived: boolean;
  /** Only this user's experiments (a username); '' or absent: everyone's. */
  owner?: string;
  /** Only the experiments of this workspace (its name); '' or absent: every workspace. */
  workspace?: string;
}

export const NO_TABLE_FILTER: ITableFilter = {
  state: '',
  text: '',
  showArchived: false,
  owner: '',
  workspace: ''
};

/** The workspace an experiment is in, by name ('' when the master does not say). */
export function experimentWorkspace(experiment: IExperiment): string {
  const name = (experiment as { workspaceName?: unknown }).workspaceName;
  return typeof name === 'string' ? name : '';
}

/** The distinct values of `of` among the experiments, sorted (empty ones left out). */
function choices(experiments: Iterable<IExperiment>, of: (e: IExperiment) => string): string[] {
  const seen = new Set<string>();
  for (const experiment of experiments) {
    const value = of(experiment);
    if (value) {
      seen.add(value);
    }
  }
  return [...seen].sort((a, b) => a.localeCompare(b));
}

/** The users whose experiments are listed: the user filter's choices. */
export function ownerChoices(experiments: Iterable<IExperiment>): string[] {
  return choices(experiments, experimentOwner);
}

/** The workspaces the listed experiments are in: the workspace filter's choices. */
export function workspaceChoices(experiments: Iterable<IExperiment>): string[] {
  return choices(experiments, experimentWorkspace);
}

function matchesWord(experiment: IExperiment, word: string): boolean {
  if (word.startsWith('label:')) {
    const wanted = word.slice('label:'.length);
    return labelsOf(experiment).some(label => label.toLowerCase().includes(wanted));
  }
  if (/^\d+$/.test(word) && String(experiment.id) === word) {
    return true;
  }
  return (
    (experiment.name ?? '').toLowerCase().includes(word) ||
    labelsOf(experiment).some(label => label.toLowerCase().includes(word)) ||
    (typeof experiment.notes === 'string' && experiment.notes.toLowerCase().includes(word)) ||
    experimentOwner(experiment).toLowerCase().includes(word)
  );
}

/** The experiments the table shows (in their given order). */
export function filterTable(
  experiments: Iterable<IExperiment>,
  filter: ITableFilter
): IExperiment[] {
  const words = filter.text.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const kept: IExperiment[] = [];
  for (const experiment of experiments) {
    if (!filter.showArchived && experiment.archived) {
      continue;
    }
    if (filter.state && experiment.state !== filter.state) {
      continue;
    }
    if (filter.owner && experimentOwner(experiment) !== filter.owner) {
      continue;
    }
    if (filter.workspace && experimentWorkspace(experiment) !== filter.workspace) {
      continue;
    }
    if (words.every(word => matchesWord(experiment, word))) {
      kept.push(experiment);
    }
  }
  return kept;
}

/** What the table shows: filtered, then sorted. */
export function tableRows(
  experiments: Iterable<IExperiment>,
  filter: ITableFilter,
  sort: ISort,
  now: number = Date.now()
): IExperiment[] {
  return sortExperiments(filterTable(experiments, filter), sort, now);
}

/** A bulk action of the table: the master's actions and deletion. */
export type BulkAction = ExperimentAction | 'delete';

/** Whether the master accepts this action on this experiment now (deletion: once finished). */
export function bulkAllowed(
  experiment: Pick<IExperiment, 'state' | 'archived' | 'unmanaged' | 'run_state'>,
  action: BulkAction
): boolean {
  if (action === 'delete') {
    return isTerminal(experiment.state);
  }
  return allowedActions(experiment).has(action);
}

/**
 * Split a selection for one bulk action: the experiments it applies to and those it skips
 * (with the reason shown to the user), so one click never sends requests bound to answer 409.
 */
export function bulkTargets(
  selected: Iterable<IExperiment>,
  action: BulkAction
): { apply: IExperiment[]; skip: IExperiment[] } {
  const apply: IExperiment[] = [];
  const skip: IExperiment[] = [];
  for (const experiment of selected) {
    (bulkAllowed(experiment, action) ? apply : skip).push(experiment);
  }
  return { apply, skip };
}

/** The one-line summary of a bulk action's outcome. */
export function bulkSummary(
  action: BulkAction,
  done: number,
  skipped: number,
  failed: { id: number; message: string }[]
): string {
  const parts = [`${action}: ${done} experiment${done === 1 ? '' : 's'}`];
  if (skipped) {
    parts.push(`${skipped} skipped (not allowed in their state)`);
  }
  if (failed.length) {
    const first = failed[0];
    parts.push(
      `${failed.length} failed (experiment ${first.id}: ${first.message}${failed.length > 1 ? '; …' : ''})`
    );
  }
  return parts.join(', ');
}

/** A tab's title: "Experiment 12: mnist-search" (the id alone until the name is known). */
export function experimentTabTitle(id: number, name?: string | null): string {
  const trimmed = (name ?? '').trim();
  return trimmed ? `Experiment ${id}: ${trimmed}` : `Experiment ${id}`;
}

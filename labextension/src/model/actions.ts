/**
 * What the fork / re-run / continue / register dialogs need to know and check, pure (no DOM),
 * tested under plain node: the length a new experiment trains for, what the user typed, and
 * which trials can be continued.
 */
import type { ICheckpoint, IExperiment, ITrial } from '../api/types';
import { bestTrialId } from './trialTable';

/** A searcher's `max_length`: its number and unit ('' for a plain number); null without one. */
export function searcherLength(
  config: Record<string, unknown> | undefined
): { value: number; unit: string } | null {
  const searcher = (config?.searcher ?? null) as Record<string, unknown> | null;
  const length = searcher?.max_length;
  if (typeof length === 'number' && Number.isInteger(length)) {
    return { value: length, unit: '' };
  }
  if (length && typeof length === 'object' && !Array.isArray(length)) {
    const entries = Object.entries(length as Record<string, unknown>);
    if (entries.length === 1 && typeof entries[0][1] === 'number') {
      return { value: entries[0][1] as number, unit: entries[0][0] };
    }
  }
  return null;
}

/** What a length field holds: a positive integer, null when left empty (the parent's), or
 * the problem in words. */
export function parseLength(text: string): number | null | { problem: string } {
  const trimmed = text.trim();
  if (!trimmed) {
    return null;
  }
  if (!/^[0-9]+$/.test(trimmed) || Number(trimmed) < 1 || !Number.isSafeInteger(Number(trimmed))) {
    return { problem: `max_length: expected a positive whole number, got "${trimmed}"` };
  }
  return Number(trimmed);
}

/**
 * Whether a trial can be continued: it needs a checkpoint to start from (the master says so
 * too; the dialog greys the choice out instead of offering a 400).
 */
export function canContinue(trial: Pick<ITrial, 'latest_checkpoint'>): boolean {
  return typeof trial.latest_checkpoint === 'string' && trial.latest_checkpoint.length > 0;
}

/** Whether the master can make a new experiment from this one (a kernel run has no model
 * definition to run again). */
export function canRunAgain(experiment: Pick<IExperiment, 'unmanaged'>): boolean {
  return !experiment.unmanaged;
}

/** A checkpoint can be registered while its files exist. */
export function canRegister(checkpoint: Pick<ICheckpoint, 'state'>): boolean {
  return checkpoint.state === 'COMPLETED';
}

/**
 * The model name typed for a new model, checked as the master checks it (so the dialog says
 * what is wrong before a round trip): '' when fine, else the problem.
 */
export function modelNameProblem(name: string, existing: readonly string[]): string {
  const trimmed = name.trim();
  if (!trimmed) {
    return 'the model needs a name';
  }
  if (trimmed.includes('/') || trimmed.includes('\\')) {
    return 'a model name cannot contain slashes';
  }
  if (/^[0-9]+$/.test(trimmed)) {
    return 'a model name cannot be only digits (it would read as an id)';
  }
  if (/\s\s/.test(trimmed)) {
    return 'a model name cannot contain two spaces in a row';
  }
  const lower = trimmed.toLowerCase();
  if (existing.some(other => other.toLowerCase() === lower)) {
    return `a model named "${trimmed}" exists: pick it from the list instead`;
  }
  return '';
}

/** The config a fork dialog starts from: the parent's expanded config as readable JSON. */
export function forkConfigText(experiment: Pick<IExperiment, 'config'>): string {
  return JSON.stringify(experiment.config ?? {}, null, 2);
}

/**
 * The trial that stands for an experiment in a comparison of experiments: its best by its
 * own searcher metric, else its latest (so an experiment without validations still shows).
 */
export function representativeTrial(
  experiment: Pick<IExperiment, 'searcher'>,
  trials: ITrial[]
): ITrial | null {
  const metric = experiment.searcher?.metric ?? 'loss';
  const best = bestTrialId(trials, metric, experiment.searcher?.smaller_is_better !== false);
  const newest = [...trials].sort((a, b) => b.id - a.id);
  return trials.find(t => t.id === best) ?? newest[0] ?? null;
}

/**
 * What the Checkpoints section lists, in which order, and which one is the best: pure, so the
 * rules are unit-tested without a DOM.
 */
import type { ICheckpoint } from '../api/types';

/** The rows to show and what the table says about the rest. */
export interface ICheckpointList {
  /** Best metric first (the searcher's direction), then those without the metric. */
  rows: ICheckpoint[];
  /** The uuid of the best COMPLETED checkpoint by the metric (null: none has it). */
  best: string | null;
  /** DELETED checkpoints left out (their files are gone: nothing to use). */
  hiddenDeleted: number;
}

/** The checkpoint's value of `metric` when it is a finite number (NaN never wins). */
export function checkpointMetric(checkpoint: ICheckpoint, metric: string): number | null {
  const value = (checkpoint.validation_metrics ?? {})[metric];
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/**
 * Order the experiment's checkpoints for the table: by the searcher metric, best first (the
 * first thing a user looks for), ties and checkpoints without a validation by trial and step;
 * DELETED ones only when `showDeleted`.
 */
export function checkpointList(
  checkpoints: Iterable<ICheckpoint>,
  metric: string,
  smallerIsBetter: boolean,
  showDeleted = false
): ICheckpointList {
  const all = [...checkpoints];
  const shown = showDeleted ? all : all.filter(c => c.state !== 'DELETED');
  const sign = smallerIsBetter ? 1 : -1;
  const byPosition = (a: ICheckpoint, b: ICheckpoint): number =>
    a.trial_id - b.trial_id || (a.steps_completed ?? 0) - (b.steps_completed ?? 0);
  const rows = shown.sort((a, b) => {
    const x = checkpointMetric(a, metric);
    const y = checkpointMetric(b, metric);
    if (x !== null && y !== null && x !== y) {
      return sign * (x - y);
    }
    if ((x === null) !== (y === null)) {
      return x === null ? 1 : -1;
    }
    return byPosition(a, b);
  });
  const best = rows.find(c => c.state === 'COMPLETED' && checkpointMetric(c, metric) !== null);
  return {
    rows,
    best: best?.uuid ?? null,
    hiddenDeleted: all.length - shown.length
  };
}

/** What an empty table says: a finished experiment will never save one. */
export function noCheckpointsText(finished: boolean, deleted: number): string {
  if (deleted) {
    return `All ${deleted} checkpoint${deleted === 1 ? ' was' : 's were'} deleted.`;
  }
  return finished ? 'This experiment saved no checkpoints.' : 'No checkpoints yet.';
}

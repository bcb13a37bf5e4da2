/**
 * Which experiments ended while this page watched them, and what the notification says
 * (notebook/endNotifier.ts shows it). Pure (no DOM), tested under plain node.
 */
import type { IExperiment } from '../api/types';
import { formatMetric } from './format';
import { isTerminal } from './states';

/** Which experiments were seen running, and which of them just ended. Pure. */
export class ExperimentEndWatch {
  private _running = new Set<number>();

  /** The experiments seen running (not ended yet). */
  get running(): number[] {
    return [...this._running];
  }

  /**
   * Fold in an experiment's latest JSON; true exactly once: when an experiment seen running
   * is now COMPLETED, ERROR or CANCELED. A deleted one is forgotten; one never seen running
   * (finished before this page loaded) is never announced.
   */
  update(experiment: Pick<IExperiment, 'id' | 'state' | 'deleted'>): boolean {
    const { id, state } = experiment;
    if (experiment.deleted || state === 'DELETED') {
      this._running.delete(id);
      return false;
    }
    if (!isTerminal(state)) {
      this._running.add(id);
      return false;
    }
    return this._running.delete(id);
  }
}

export type EndKind = 'success' | 'error' | 'warning';

/** The notification of an ended experiment: its kind and one line of text. */
export function endMessage(
  experiment: Pick<IExperiment, 'id' | 'name' | 'state' | 'best_validation' | 'searcher'>,
  notebook: string
): { kind: EndKind; text: string } {
  const name = experiment.name ? ` "${experiment.name}"` : '';
  const where = notebook ? ` (from ${notebook})` : '';
  const head = `Experiment ${experiment.id}${name}${where}`;
  if (experiment.state === 'COMPLETED') {
    const metric = experiment.searcher?.metric;
    const best =
      metric && experiment.best_validation !== null && experiment.best_validation !== undefined
        ? `: best ${metric} ${formatMetric(experiment.best_validation)}`
        : '';
    return { kind: 'success', text: `${head} completed${best}` };
  }
  if (experiment.state === 'ERROR') {
    return { kind: 'error', text: `${head} failed (ERROR): open it for the trials' errors` };
  }
  return { kind: 'warning', text: `${head} ended ${experiment.state}` };
}

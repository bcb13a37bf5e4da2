/**
 * Experiment and trial states: what a state means, which actions it allows, how the list
 * filters experiments. Pure (no DOM), tested under plain node.
 */
import { TERMINAL_EXPERIMENT_STATES } from '../api/contract.generated';
import type { IExperiment, ITrial } from '../api/types';

const TERMINAL_STATES = new Set<string>(TERMINAL_EXPERIMENT_STATES);

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
  if (state.startsWith('STOPPING') || state === 'PAUSING') {
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
  // Its run was asked to stop and has not exited yet: a paused trial reads PAUSED in the
  // master at once, but it is not paused until its run is gone.
  if (trial.run_state === 'STOPPING' && (trial.state === 'PAUSED' || trial.state === 'ACTIVE')) {
    return 'PAUSING';
  }
  return trial.state;
}

/** Why a run was asked to stop, in words (`stop_reason` of a STOPPING run). */
export function stopReasonText(reason: string | null | undefined): string {
  switch (reason) {
    case 'pause':
      return 'user pause';
    case 'master-stop':
      return 'master stopping';
    case 'cancel':
      return 'experiment canceled';
    case 'stop':
      return 'the searcher stopped it';
    case 'rebalance':
      return 'the scheduler gave its slots to another job; it resumes from its checkpoint';
    case 'kill':
    case 'kill-trial':
      return 'killed';
    default:
      return 'asked to stop';
  }
}

/**
 * Why an unfinished trial is where it is, in words shown under its state ('' when nothing needs
 * saying): QUEUED, the scheduler's reason it waits (quota, fair share, priority, pool); its run
 * asked to exit, that it is being preempted (rebalance: it resumes from its checkpoint) or why
 * else it stops. (Why a trial ended is `trialExitNote`.)
 */
export function trialWaitNote(
  trial: Pick<ITrial, 'state' | 'run_state' | 'stop_reason' | 'wait_reason'>
): string {
  const state = trialDisplayState(trial);
  if (state === 'QUEUED') {
    return trial.wait_reason ?? '';
  }
  if (trial.run_state === 'STOPPING' && (trial.state === 'ACTIVE' || trial.state === 'PAUSED')) {
    return trial.stop_reason === 'rebalance'
      ? `Preempted: ${stopReasonText('rebalance')}`
      : `Stopping: ${stopReasonText(trial.stop_reason)}`;
  }
  return '';
}

/**
 * The state an experiment shows: PAUSING while it is PAUSED (or ACTIVE, when the master is
 * stopping) but some of its trials' runs have not exited yet (`counts.stopping`), else its own.
 */
export function experimentDisplayState(
  state: string,
  counts: { stopping: number; stopReason: string | null },
  runState?: string | null
): string {
  if (
    (counts.stopping > 0 || runState === 'STOPPING') &&
    (state === 'PAUSED' || state === 'ACTIVE')
  ) {
    return 'PAUSING';
  }
  return state;
}

/**
 * The state an experiment shows where its trials are not loaded (the sidebar's table, bulk
 * actions): PAUSING while the master says a run asked to stop has not exited yet
 * (`run_state` STOPPING), else its own state.
 */
export function listDisplayState(experiment: Pick<IExperiment, 'state' | 'run_state'>): string {
  return experimentDisplayState(
    experiment.state,
    { stopping: 0, stopReason: null },
    experiment.run_state
  );
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

/**
 * How many of these trials hold slots, how many wait for them, and how many runs were asked
 * to stop but still run (with the first such run's reason), for a one-line summary.
 */
export function runCounts(trials: Iterable<Pick<ITrial, 'state' | 'run_state' | 'stop_reason'>>): {
  running: number;
  queued: number;
  stopping: number;
  stopReason: string | null;
} {
  let running = 0;
  let queued = 0;
  let stopping = 0;
  let stopReason: string | null = null;
  for (const trial of trials) {
    if (trial.run_state === 'STOPPING') {
      stopping += 1;
      stopReason = stopReason ?? trial.stop_reason ?? null;
      continue;
    }
    const state = trialDisplayState(trial);
    if (state === 'QUEUED') {
      queued += 1;
    } else if (state === 'ACTIVE') {
      running += 1;
    }
  }
  return { running, queued, stopping, stopReason };
}

export type ExperimentAction = 'pause' | 'activate' | 'kill' | 'archive' | 'unarchive';

/** The actions the master accepts in this state (the others answer 409). */
export function allowedActions(
  experiment: Pick<IExperiment, 'state' | 'archived' | 'unmanaged' | 'run_state'>,
  stoppingRuns = 0
): Set<ExperimentAction> {
  const actions = new Set<ExperimentAction>();
  const state = experiment.state;
  // While runs asked to stop still drain (PAUSING), neither Pause nor Activate can do what
  // its label says: the trials are not paused yet, and an Activate would only requeue them
  // behind their own exit. Both come back once the trials have really stopped.
  const draining = stoppingRuns > 0 || experiment.run_state === 'STOPPING';
  // A run in a kernel is paused or resumed there, not by the master (which answers 409).
  if (state === 'ACTIVE' && !experiment.unmanaged && !draining) {
    actions.add('pause');
  }
  if (state === 'PAUSED' && !experiment.unmanaged && !draining) {
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

/**
 * What a kernel trial's console button can do now: `attach` to the kernel of a RUNNING trial
 * (a QUEUED one has no kernel yet), `debug` the kept kernel of a failed one until the master
 * lets it go (`kernel_kept`), or nothing: a button that would only answer with an error is
 * not offered.
 */
export function kernelConsoleAction(trial: ITrial): 'attach' | 'debug' | null {
  if (trial.state === 'ACTIVE' && trial.run_state === 'RUNNING') {
    return 'attach';
  }
  if (trial.state === 'ERROR' && trial.kernel_kept) {
    return 'debug';
  }
  return null;
}

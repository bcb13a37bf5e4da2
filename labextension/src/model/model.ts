/**
 * State of the sidebar list and of one experiment view, fed by REST answers and by events.
 *
 * Plain classes with no DOM and no JupyterLab imports: the views only render them, and the
 * unit tests drive them directly. Events and REST answers may overlap (an event can arrive
 * while the first fetch is in flight), so every `add` is idempotent by id.
 */
import { improvedBest } from './trialTable';
import type {
  EventType,
  ICheckpoint,
  IExperiment,
  ILogLine,
  IMetricReport,
  ITrial
} from '../api/types';

/** A minimal change notifier (lumino's Signal needs an owner object; this needs nothing). */
export class Emitter<T> {
  private _listeners = new Set<(value: T) => void>();

  connect(listener: (value: T) => void): () => void {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  emit(value: T): void {
    for (const listener of [...this._listeners]) {
      listener(value);
    }
  }
}

const LIST_FIELDS = [
  'name',
  'state',
  'archived',
  'progress',
  'num_trials',
  'best_validation',
  'start_time',
  'end_time',
  'notes',
  'description',
  // STOPPING shows the row as PAUSING (and disables Pause/Activate) until the trials stop.
  'run_state',
  // The user and workspace filters (a moved experiment leaves or joins the filtered list).
  'username',
  'workspaceName',
  'projectName'
] as const;

/** True when two versions of an experiment look the same in the list. */
export function sameListFields(a: IExperiment, b: IExperiment): boolean {
  return (
    LIST_FIELDS.every(field => a[field] === b[field]) &&
    a.searcher?.metric === b.searcher?.metric &&
    (a.labels ?? []).join('\n') === (b.labels ?? []).join('\n')
  );
}

/** The experiments the sidebar lists. */
export class ExperimentListModel {
  readonly changed = new Emitter<void>();
  private _experiments = new Map<number, IExperiment>();
  private _loaded = false;

  /** Whether a list answer arrived (an empty master is loaded and empty, not loading). */
  get loaded(): boolean {
    return this._loaded;
  }

  get experiments(): Iterable<IExperiment> {
    return this._experiments.values();
  }

  get size(): number {
    return this._experiments.size;
  }

  get(id: number): IExperiment | undefined {
    return this._experiments.get(id);
  }

  /**
   * Replace the list with a fresh answer. Unchanged experiments keep their old object, so the
   * view (which re-renders a row only when its object changes) redoes only what changed —
   * polling every few seconds must not rebuild a thousand rows.
   */
  replaceAll(experiments: IExperiment[]): void {
    const next = new Map<number, IExperiment>();
    // The first answer always changes the view, even an empty one: it ends "Loading…".
    let changed = !this._loaded || experiments.length !== this._experiments.size;
    this._loaded = true;
    for (const experiment of experiments) {
      const known = this._experiments.get(experiment.id);
      if (known && sameListFields(known, experiment)) {
        next.set(experiment.id, known);
      } else {
        next.set(experiment.id, experiment);
        changed = true;
      }
    }
    this._experiments = next;
    if (changed) {
      this.changed.emit();
    }
  }

  /** Fold a trial update in: it may carry a better validation than the experiment shows. */
  applyTrial(trial: ITrial): void {
    const experiment = this._experiments.get(trial.experiment_id);
    if (!experiment) {
      return;
    }
    const best = improvedBest(experiment, trial);
    if (best !== null) {
      this.upsert({ ...experiment, best_validation: best });
    }
  }

  /** Apply an experiment event: its new JSON, or its deletion (`deleted: true`). */
  applyEvent(experiment: IExperiment): void {
    if (experiment.deleted) {
      if (this._experiments.delete(experiment.id)) {
        this.changed.emit();
      }
      return;
    }
    this.upsert(experiment);
  }

  upsert(experiment: IExperiment): void {
    const known = this._experiments.get(experiment.id);
    // Event payloads omit the config; keep one we already have.
    const merged =
      known?.config && !experiment.config ? { ...experiment, config: known.config } : experiment;
    this._experiments.set(experiment.id, merged);
    this.changed.emit();
  }
}

/** What an event changed in an experiment view (null: not this experiment's). */
export type ViewPart = 'experiment' | 'trials' | 'metrics' | 'checkpoints' | 'logs';

/** Everything one experiment view shows, except logs (see LogBuffer). */
export class ExperimentDataModel {
  readonly changed = new Emitter<ViewPart>();
  experiment: IExperiment | null = null;
  readonly trials = new Map<number, ITrial>();
  readonly checkpoints = new Map<string, ICheckpoint>();
  /** group -> trial id -> reports in ascending id order. */
  readonly metrics = new Map<string, Map<number, IMetricReport[]>>();
  private _seenMetricIds = new Set<number>();
  private _lastMetricId = 0;

  constructor(readonly experimentId: number) {}

  /** The highest metric id seen: the `after_id` for catching up after a reconnect. */
  get lastMetricId(): number {
    return this._lastMetricId;
  }

  setExperiment(experiment: IExperiment): void {
    if (experiment.id !== this.experimentId) {
      return;
    }
    const config = experiment.config ?? this.experiment?.config;
    this.experiment = config ? { ...experiment, config } : experiment;
    this.changed.emit('experiment');
  }

  setTrials(trials: ITrial[]): void {
    for (const trial of trials) {
      if (trial.experiment_id === this.experimentId) {
        this.trials.set(trial.id, trial);
      }
    }
    this.changed.emit('trials');
  }

  setCheckpoints(checkpoints: ICheckpoint[]): void {
    for (const checkpoint of checkpoints) {
      this.checkpoints.set(checkpoint.uuid, checkpoint);
    }
    this.changed.emit('checkpoints');
  }

  /** Add metric reports of this experiment's trials; returns how many were new. */
  addMetrics(reports: IMetricReport[]): number {
    let added = 0;
    for (const report of reports) {
      if (this._seenMetricIds.has(report.id) || !this.trials.has(report.trial_id)) {
        continue;
      }
      this._seenMetricIds.add(report.id);
      this._lastMetricId = Math.max(this._lastMetricId, report.id);
      let byTrial = this.metrics.get(report.group);
      if (!byTrial) {
        byTrial = new Map();
        this.metrics.set(report.group, byTrial);
      }
      let list = byTrial.get(report.trial_id);
      if (!list) {
        list = [];
        byTrial.set(report.trial_id, list);
      }
      if (list.length && list[list.length - 1].id > report.id) {
        // Out of order (an event overtook a page of the first fetch): keep the list sorted.
        const at = list.findIndex(r => r.id > report.id);
        list.splice(at, 0, report);
      } else {
        list.push(report);
      }
      added += 1;
    }
    if (added) {
      this.changed.emit('metrics');
    }
    return added;
  }

  /** Metric reports of one group, by trial (empty when none). */
  metricsOf(group: string): Map<number, IMetricReport[]> {
    return this.metrics.get(group) ?? new Map();
  }

  /**
   * Apply one live event. Metric events name only their trial, so a metric of a trial this
   * view has not seen yet is dropped here and fetched with the trial (returns 'trials' so the
   * caller refreshes).
   */
  applyEvent(type: EventType, payload: unknown): ViewPart | null {
    switch (type) {
      case 'experiment': {
        const experiment = payload as IExperiment;
        if (experiment.id !== this.experimentId) {
          return null;
        }
        this.setExperiment(experiment);
        return 'experiment';
      }
      case 'trial': {
        const trial = payload as ITrial;
        if (trial.experiment_id !== this.experimentId) {
          return null;
        }
        this.setTrials([trial]);
        const best = this.experiment ? improvedBest(this.experiment, trial) : null;
        if (best !== null && this.experiment) {
          this.setExperiment({ ...this.experiment, best_validation: best });
        }
        return 'trials';
      }
      case 'metric': {
        const report = payload as IMetricReport;
        if (!this.trials.has(report.trial_id)) {
          return null;
        }
        this.addMetrics([report]);
        return 'metrics';
      }
      case 'checkpoint': {
        const checkpoint = payload as ICheckpoint;
        if (checkpoint.experiment_id !== this.experimentId) {
          return null;
        }
        this.setCheckpoints([checkpoint]);
        return 'checkpoints';
      }
      case 'log': {
        const line = payload as ILogLine;
        return this.trials.has(line.trial_id) ? 'logs' : null;
      }
      default:
        return null;
    }
  }
}

/** The log lines of one trial, bounded so a chatty trial cannot grow the tab's memory. */
export class LogBuffer {
  readonly changed = new Emitter<void>();
  private _lines: ILogLine[] = [];
  private _ids = new Set<number>();

  /**
   * `trialId`: the trial whose lines it keeps, or null for every trial `accepts` says yes to
   * (the all-trials view: the experiment's trials).
   */
  constructor(
    readonly trialId: number | null,
    readonly maxLines = 10000,
    private readonly _accepts: (trialId: number) => boolean = () => false
  ) {}

  get lines(): readonly ILogLine[] {
    return this._lines;
  }

  get lastId(): number {
    return this._lines.length ? this._lines[this._lines.length - 1].id : 0;
  }

  /** The ranks seen so far, sorted (for the rank filter). */
  ranks(): number[] {
    const ranks = new Set<number>();
    for (const line of this._lines) {
      if (line.rank !== null && line.rank !== undefined) {
        ranks.add(line.rank);
      }
    }
    return [...ranks].sort((a, b) => a - b);
  }

  /** Add lines of this trial (others and duplicates are ignored); returns how many were new. */
  add(lines: ILogLine[]): number {
    let added = 0;
    for (const line of lines) {
      const mine =
        this.trialId === null ? this._accepts(line.trial_id) : line.trial_id === this.trialId;
      if (!mine || this._ids.has(line.id)) {
        continue;
      }
      this._ids.add(line.id);
      this._lines.push(line);
      added += 1;
    }
    if (!added) {
      return 0;
    }
    this._lines.sort((a, b) => a.id - b.id);
    if (this._lines.length > this.maxLines) {
      for (const dropped of this._lines.splice(0, this._lines.length - this.maxLines)) {
        this._ids.delete(dropped.id);
      }
    }
    this.changed.emit();
    return added;
  }
}

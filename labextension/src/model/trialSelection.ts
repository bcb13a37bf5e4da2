/**
 * Which trials the experiment view plots and compares, and fetching their learning curves:
 * until the user picks, all trials of a small search and the best ones of a large one; only the
 * plotted trials' metrics are fetched, downsampled, each trial from the start once and then only
 * what is newer.
 */
import type { DeterminedClient } from '../api/client';
import type { ExperimentDataModel } from './model';
import { defaultPlottedTrials } from './trialTable';

/** How many trials the curves show until the user picks. */
export const DEFAULT_SELECTED_TRIALS = 8;

/** How many trials "select all" takes (curves of more are a blur, and each one is fetched). */
export const MAX_SELECTED_TRIALS = 50;

/** Reports per trial and group a chart loads at first (downsampled by the server). */
export const CURVE_POINTS = 1000;

export class TrialSelection {
  private _selected = new Set<number>();
  private _userSelected = false;
  /** Trials whose curves were fetched (later fetches ask only what is newer). */
  private _curvesLoaded = new Set<number>();

  constructor(
    private readonly _model: ExperimentDataModel,
    private readonly _client: Pick<DeterminedClient, 'experimentMetrics'>
  ) {}

  /** Whether the user picked the trials (then defaults no longer replace the selection). */
  get userSelected(): boolean {
    return this._userSelected;
  }

  /** The searcher metric of the experiment (`loss` until it is known). */
  get metric(): string {
    return this._model.experiment?.searcher?.metric ?? 'loss';
  }

  get smallerIsBetter(): boolean {
    return this._model.experiment?.searcher?.smaller_is_better !== false;
  }

  has(trialId: number): boolean {
    return this._selected.has(trialId);
  }

  /** The selected trials the model knows, in id order. */
  ids(): number[] {
    return [...this._selected].filter(id => this._model.trials.has(id)).sort((a, b) => a - b);
  }

  /**
   * Until the user picks, plot all trials of a small search and the best ones of a large one
   * (the best trial is always among them). Returns whether the selection changed.
   */
  selectDefaults(): boolean {
    if (this._userSelected) {
      return false;
    }
    const wanted = defaultPlottedTrials(
      this._model.trials.values(),
      this.metric,
      this.smallerIsBetter,
      DEFAULT_SELECTED_TRIALS
    );
    if (wanted.length === this._selected.size && wanted.every(id => this._selected.has(id))) {
      return false;
    }
    this._selected = new Set(wanted);
    return true;
  }

  /** Add or remove one trial (the user's pick). Returns whether it was added. */
  toggle(trialId: number, on = !this._selected.has(trialId)): boolean {
    this._userSelected = true;
    if (on) {
      this._selected.add(trialId);
    } else {
      this._selected.delete(trialId);
    }
    return on;
  }

  /** Replace the selection (the Trials toolbar's buttons), at most MAX_SELECTED_TRIALS. */
  replace(ids: number[]): void {
    this._userSelected = true;
    this._selected = new Set(ids.slice(0, MAX_SELECTED_TRIALS));
  }

  /**
   * Fetch the metrics of the selected trials only, downsampled: a large experiment has far more
   * reports than a chart shows. A trial's first fetch starts at the beginning; later ones ask
   * what is newer than everything seen (events bring the rest while the stream is live).
   * `freshOnly`: fetch only trials never fetched (after the selection grew).
   */
  async loadCurves(freshOnly = false): Promise<void> {
    const selected = this.ids();
    const fresh = selected.filter(id => !this._curvesLoaded.has(id));
    const loaded = freshOnly ? [] : selected.filter(id => this._curvesLoaded.has(id));
    if (!fresh.length && !loaded.length) {
      return;
    }
    // Marked before the answer: a second call meanwhile must not fetch them again.
    fresh.forEach(id => this._curvesLoaded.add(id));
    const experimentId = this._model.experimentId;
    try {
      const answers = await Promise.all([
        this._client.experimentMetrics(experimentId, '', 0, {
          trialIds: fresh,
          maxDatapoints: CURVE_POINTS
        }),
        this._client.experimentMetrics(experimentId, '', this._model.lastMetricId, {
          trialIds: loaded,
          maxDatapoints: CURVE_POINTS
        })
      ]);
      this._model.addMetrics(answers.flat());
    } catch (error) {
      fresh.forEach(id => this._curvesLoaded.delete(id));
      throw error;
    }
  }
}

/**
 * Experiments side by side (a main-area tab opened from the sidebar's table: tick two or more
 * rows, then Compare): each experiment's best trial by its searcher metric, with the same
 * comparison as the experiment view's Compare section (compareView.ts: state, steps, metrics
 * with the best marked, hyperparameters that differ marked, curves of one metric overlaid) —
 * one implementation, fed with trials from several experiments.
 */
import { Widget } from '@lumino/widgets';

import { DeterminedClient, describeError } from '../api/client';
import { errorBox, h, replaceChildren } from '../dom';
import { representativeTrial } from '../model/actions';
import { CompareSection } from './compareView';
import type { IExperiment, IMetricReport, ITrial } from '../api/types';

/** The most experiments one comparison shows (the curves get unreadable past that). */
export const MAX_COMPARED = 8;
/** The points of each curve (downsampled by the master). */
const MAX_POINTS = 500;

/** One compared experiment: the experiment and the trial that stands for it. */
export interface IComparedExperiment {
  experiment: IExperiment;
  trial: ITrial | null;
}

export class ExperimentCompareView extends Widget {
  private _compare = new CompareSection();
  private _summary = h('div', { class: 'jp-Det-crossSummary' });
  private _message = h('div', { class: 'jp-Det-message' });
  private _compared: IComparedExperiment[] = [];
  private _metrics = new Map<string, Map<number, IMetricReport[]>>();

  constructor(
    private readonly _client: DeterminedClient,
    readonly experimentIds: number[],
    private readonly _open: (id: number) => void
  ) {
    super();
    this.id = `jupyter-determined-compare-${experimentIds.join('-')}`;
    this.addClass('jp-Det-experimentView');
    this.addClass('jp-Det-crossCompare');
    this.title.label = `Compare experiments ${experimentIds.join(', ')}`;
    this.title.closable = true;
    this.node.append(
      h('div', { class: 'jp-Det-expHeader' }, h('span', null, this.title.label)),
      this._message,
      this._summary,
      this._compare.node
    );
  }

  /** Load every experiment, its best trial and that trial's curves, then show them. */
  async load(): Promise<void> {
    replaceChildren(this._message, h('div', { class: 'jp-Det-info' }, 'Loading…'));
    try {
      this._compared = await Promise.all(
        this.experimentIds.map(async id => {
          const { experiment, trials } = await this._client.getExperiment(id);
          return { experiment, trial: representativeTrial(experiment, trials) };
        })
      );
      for (const group of ['validation', 'training']) {
        const byTrial = new Map<number, IMetricReport[]>();
        await Promise.all(
          this._compared.map(async ({ experiment, trial }) => {
            if (trial) {
              const reports = await this._client.experimentMetrics(experiment.id, group, 0, {
                trialIds: [trial.id],
                maxDatapoints: MAX_POINTS
              });
              byTrial.set(trial.id, reports);
            }
          })
        );
        this._metrics.set(group, byTrial);
      }
      replaceChildren(this._message);
    } catch (error) {
      replaceChildren(this._message, errorBox(`Cannot compare: ${describeError(error)}`));
      return;
    }
    this.render();
  }

  render(): void {
    const rows = this._compared.map(({ experiment, trial }) =>
      h(
        'li',
        { attrs: { 'data-experiment-id': String(experiment.id) } },
        h(
          'button',
          {
            class: 'jp-Det-linkButton',
            title: `Open experiment ${experiment.id}`,
            on: { click: () => this._open(experiment.id) }
          },
          `#${experiment.id} ${experiment.name || '(unnamed)'}`
        ),
        ` (${experiment.state}, ${experiment.searcher?.name ?? '?'} on ${experiment.searcher?.metric ?? '?'}): `,
        trial ? `trial ${trial.id}` : 'no trials'
      )
    );
    replaceChildren(
      this._summary,
      h('div', { class: 'jp-Det-hint' }, "Each experiment's best trial by its searcher metric:"),
      h('ul', { class: 'jp-Det-crossList' }, ...rows)
    );
    const trials = this._compared.map(c => c.trial).filter((t): t is ITrial => t !== null);
    this._compare.render({
      // The first experiment's metric decides "best" across the columns.
      experiment: this._compared[0]?.experiment ?? null,
      trials,
      metricsOf: group => this._metrics.get(group) ?? new Map()
    });
  }

  override dispose(): void {
    if (!this.isDisposed) {
      this._compare.dispose();
    }
    super.dispose();
  }
}

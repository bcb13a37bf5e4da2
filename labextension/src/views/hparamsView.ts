/**
 * The Hyperparameters section of the experiment view: parallel coordinates of the whole search,
 * then one hyperparameter against the searcher metric (a log axis for log-sampled ones), then
 * the search analysis (importance, optimisation history, slices, contour: searchView.ts).
 */
import { Chart } from '../chart/chart';
import { h, replaceChildren, select } from '../dom';
import { hparamScatter } from '../model/series';
import { isTerminal } from '../model/states';
import { bestTrialId, hparamColumns } from '../model/trialTable';
import { useLogAxis } from '../model/hparams';
import { ParallelCoordinates } from '../chart/parcoords';
import { SearchAnalysis } from './searchView';
import type { IExperiment, ITrial } from '../api/types';

export interface IHparamsInput {
  experiment: IExperiment | null;
  trials: ITrial[];
  /** Trials selected for the curves and the comparison. */
  selected: Set<number>;
}

export class HparamsSection {
  readonly node = h('div', { class: 'jp-Det-hparams' });
  private _parcoords: ParallelCoordinates;
  private _scatter = new Chart('scatter', 'hyperparameter', 'metric');
  private _hparam = '';
  private _input: IHparamsInput | null = null;
  private _analysis = new SearchAnalysis();

  constructor(onToggle: (trialId: number) => void) {
    this._parcoords = new ParallelCoordinates(onToggle);
  }

  render(input: IHparamsInput): void {
    this._input = input;
    const { experiment, trials } = input;
    const hparams = hparamColumns(trials);
    if (!hparams.length) {
      replaceChildren(
        this.node,
        h(
          'div',
          { class: 'jp-Det-empty' },
          trials.length ? 'No hyperparameters in this experiment.' : 'No trials yet.'
        )
      );
      return;
    }
    if (!hparams.includes(this._hparam)) {
      this._hparam = hparams[0];
    }
    const metric = experiment?.searcher?.metric ?? 'loss';
    const smallerIsBetter = experiment?.searcher?.smaller_is_better !== false;
    const config = experiment?.config ?? null;
    const best = bestTrialId(trials, metric, smallerIsBetter);

    const parts: HTMLElement[] = [];
    if (trials.length >= 2) {
      this._parcoords.update({
        trials,
        hparams,
        metric,
        config,
        smallerIsBetter,
        selected: input.selected
      });
      parts.push(
        h('div', { class: 'jp-Det-chartTitle' }, `All trials: hyperparameters and best ${metric}`),
        this._parcoords.node
      );
    }

    const data = hparamScatter(trials, this._hparam, metric);
    const xs = data.points.map(p => p.x);
    this._scatter.xLabel = this._hparam;
    this._scatter.yLabel = `best ${metric}`;
    this._scatter.emptyText =
      experiment && isTerminal(experiment.state)
        ? `No trial reported a validation ${metric}.`
        : `No validation of ${metric} yet: each trial shows once it validates.`;
    this._scatter.update({
      x: xs,
      ys: [data.points.map(p => p.y)],
      labels: [`best ${metric}`],
      categories: data.categories,
      xLog: !data.categories && useLogAxis(config, this._hparam, xs),
      pointLabels: data.points.map(p => `trial ${p.trialId}`),
      highlightPoint: data.points.findIndex(p => p.trialId === best)
    });
    const picker = select(
      hparams.map(n => [n, n] as [string, string]),
      this._hparam,
      value => {
        this._hparam = value;
        this._scatter.destroyPlot();
        if (this._input) {
          this.render(this._input);
        }
      },
      'jp-Det-select jp-Det-hparamSelect'
    );
    parts.push(
      h(
        'div',
        { class: 'jp-Det-chartTitle' },
        'hyperparameter ',
        picker,
        ` vs best ${metric}`,
        h('span', { class: 'jp-Det-chartNote' }, ' (one point per trial with a validation)')
      ),
      this._scatter.node
    );
    replaceChildren(this.node, ...parts, this._analysis.node);
    this._analysis.render({
      experiment,
      trials,
      hparams,
      metric,
      smallerIsBetter,
      bestTrialId: best
    });
  }

  dispose(): void {
    this._parcoords.dispose();
    this._scatter.dispose();
    this._analysis.dispose();
  }
}

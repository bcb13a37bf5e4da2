/**
 * The search analysis under the Hyperparameters tab, as optuna-dashboard shows a study:
 * hyperparameter importance (a random forest, model/importance.ts), the optimisation history
 * (each trial's best metric in end order and the best so far), a slice per hyperparameter
 * (the metric against it) and a contour of the metric over two picked hyperparameters.
 */
import { Chart } from '../chart/chart';
import { ContourPlot } from '../chart/contour';
import { h, replaceChildren, select } from '../dom';
import { formatNumber } from '../model/format';
import { useLogAxis } from '../model/hparams';
import { IImportance, hparamImportance } from '../model/importance';
import { bestSearcherMetric } from '../model/trialTable';
import { contourPoints, optimizationHistory } from '../model/searchAnalysis';
import { hparamScatter } from '../model/series';
import { exportButtons, fileName, download } from './chartControls';
import type { IExperiment, ITrial } from '../api/types';

export interface ISearchInput {
  experiment: IExperiment | null;
  trials: ITrial[];
  hparams: string[];
  metric: string;
  smallerIsBetter: boolean;
  bestTrialId: number | null;
}

/** Slices drawn at most (one small chart each). */
const MAX_SLICES = 12;

function title(text: string, ...rest: (HTMLElement | string | null)[]): HTMLElement {
  return h('div', { class: 'jp-Det-chartTitle jp-Det-sectionTitle' }, text, ...rest);
}

export class SearchAnalysis {
  readonly node = h('div', { class: 'jp-Det-searchAnalysis' });
  private _history = new Chart('line', 'trials, in the order they ended', 'metric');
  private _slices = new Map<string, Chart>();
  private _contour = new ContourPlot();
  private _contourX = '';
  private _contourY = '';
  private _input: ISearchInput | null = null;
  /** The last importance and what it was computed from (trial events redraw often). */
  private _importanceKey = '';
  private _importanceShares: IImportance[] = [];

  render(input: ISearchInput): void {
    this._input = input;
    const { trials, hparams, metric, smallerIsBetter } = input;
    const name = (...parts: string[]) =>
      fileName('experiment', input.experiment?.id ?? 'unknown', ...parts);
    replaceChildren(
      this.node,
      title(
        'Hyperparameter importance',
        h(
          'span',
          { class: 'jp-Det-chartNote' },
          ` for ${metric} (random forest; needs 3 trials with a validation)`
        )
      ),
      this._importance(trials, hparams, metric),
      title(
        'Optimization history',
        exportButtons(this._history, () => name('history'))
      ),
      this._historyChart(trials, metric, smallerIsBetter),
      title(`Slices: ${metric} against each hyperparameter`),
      this._sliceCharts(input),
      ...this._contourBlock(input, name)
    );
  }

  private _importance(trials: ITrial[], hparams: string[], metric: string): HTMLElement {
    const key = JSON.stringify([
      metric,
      hparams,
      trials.map(t => [t.id, bestSearcherMetric(t, metric), t.hparams])
    ]);
    if (key !== this._importanceKey) {
      this._importanceKey = key;
      this._importanceShares = hparamImportance(trials, hparams, metric);
    }
    const shares = this._importanceShares;
    if (!shares.length) {
      return h(
        'div',
        { class: 'jp-Det-importance jp-Det-hint' },
        'Importance needs at least 3 trials with a validation and a hyperparameter that varies.'
      );
    }
    return h(
      'div',
      { class: 'jp-Det-importance', attrs: { role: 'list' } },
      ...shares.map(({ hparam, importance }) =>
        h(
          'div',
          {
            class: 'jp-Det-importanceRow',
            attrs: {
              role: 'listitem',
              'data-hparam': hparam,
              'data-importance': String(importance)
            }
          },
          h('span', { class: 'jp-Det-importanceName' }, hparam),
          h(
            'span',
            { class: 'jp-Det-importanceTrack' },
            h('span', {
              class: 'jp-Det-importanceBar',
              attrs: { style: `width: ${(importance * 100).toFixed(1)}%` }
            })
          ),
          h('span', { class: 'jp-Det-importanceValue' }, formatNumber(importance, 2))
        )
      )
    );
  }

  private _historyChart(trials: ITrial[], metric: string, smallerIsBetter: boolean): HTMLElement {
    const history = optimizationHistory(trials, metric, smallerIsBetter);
    const chart = this._history;
    chart.yLabel = metric;
    chart.node.dataset.group = 'history';
    chart.emptyText = `No trial reported a validation ${metric} yet.`;
    chart.update({
      x: history.trialIds.map((_, i) => i + 1),
      ys: [history.values, history.bestSoFar],
      labels: [metric, 'best so far'],
      pointsOnly: [0]
    });
    return chart.node;
  }

  private _sliceCharts(input: ISearchInput): HTMLElement {
    const config = input.experiment?.config ?? null;
    const shown = input.hparams.slice(0, MAX_SLICES);
    for (const [hparam, chart] of this._slices) {
      if (!shown.includes(hparam)) {
        chart.dispose();
        this._slices.delete(hparam);
      }
    }
    const grid = h('div', { class: 'jp-Det-slices' });
    for (const hparam of shown) {
      let chart = this._slices.get(hparam);
      if (!chart) {
        chart = new Chart('scatter', hparam, input.metric);
        chart.node.dataset.hparam = hparam;
        this._slices.set(hparam, chart);
      }
      const data = hparamScatter(input.trials, hparam, input.metric);
      const xs = data.points.map(p => p.x);
      chart.yLabel = input.metric;
      chart.emptyText = `No validation of ${input.metric} yet.`;
      chart.update({
        x: xs,
        ys: [data.points.map(p => p.y)],
        labels: [input.metric],
        categories: data.categories,
        xLog: !data.categories && useLogAxis(config, hparam, xs),
        pointLabels: data.points.map(p => `trial ${p.trialId}`),
        highlightPoint: data.points.findIndex(p => p.trialId === input.bestTrialId)
      });
      grid.appendChild(h('div', { class: 'jp-Det-slice' }, chart.node));
    }
    if (input.hparams.length > MAX_SLICES) {
      grid.appendChild(
        h(
          'div',
          { class: 'jp-Det-hint' },
          `First ${MAX_SLICES} of ${input.hparams.length} hyperparameters.`
        )
      );
    }
    return grid;
  }

  private _contourBlock(input: ISearchInput, name: (...parts: string[]) => string): HTMLElement[] {
    const numeric = input.hparams.filter(
      hparam => hparamScatter(input.trials, hparam, input.metric).categories === null
    );
    if (numeric.length < 2) {
      return [
        title('Contour'),
        h(
          'div',
          { class: 'jp-Det-contour jp-Det-hint' },
          'A contour needs two numeric hyperparameters.'
        )
      ];
    }
    if (!numeric.includes(this._contourX)) {
      this._contourX = numeric[0];
    }
    if (!numeric.includes(this._contourY) || this._contourY === this._contourX) {
      this._contourY = numeric.find(n => n !== this._contourX)!;
    }
    const rerender = () => this._input && this.render(this._input);
    const pick = (value: string, cls: string, set: (v: string) => void) =>
      select(
        numeric.map(n => [n, n] as [string, string]),
        value,
        v => {
          set(v);
          rerender();
        },
        `jp-Det-select ${cls}`
      );
    const points = contourPoints(input.trials, this._contourX, this._contourY, input.metric);
    const config = input.experiment?.config ?? null;
    this._contour.update({
      points,
      xName: this._contourX,
      yName: this._contourY,
      xLog: useLogAxis(
        config,
        this._contourX,
        points.map(p => p.x)
      ),
      yLog: useLogAxis(
        config,
        this._contourY,
        points.map(p => p.y)
      ),
      metric: input.metric,
      smallerIsBetter: input.smallerIsBetter,
      bestTrialId: input.bestTrialId
    });
    const png = h(
      'button',
      {
        class: 'jp-Det-button jp-Det-exportPng',
        on: {
          click: () =>
            download(
              `${name('contour', this._contourX, this._contourY)}.png`,
              this._contour.toPNG()
            )
        }
      },
      'PNG'
    );
    return [
      h(
        'div',
        { class: 'jp-Det-contour' },
        title(
          `Contour of ${input.metric}: `,
          pick(this._contourX, 'jp-Det-contourX', v => (this._contourX = v)),
          ' × ',
          pick(this._contourY, 'jp-Det-contourY', v => (this._contourY = v)),
          h('span', { class: 'jp-Det-chartNote' }, ' (brighter is better)'),
          h('span', { class: 'jp-Det-exports' }, png)
        ),
        points.length
          ? this._contour.node
          : h('div', { class: 'jp-Det-hint' }, `No trial has a ${input.metric} yet.`)
      )
    ];
  }

  dispose(): void {
    this._history.dispose();
    this._contour.dispose();
    for (const chart of this._slices.values()) {
      chart.dispose();
    }
  }
}

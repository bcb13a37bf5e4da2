/**
 * The Compare section of the experiment view: the selected trials side by side (compare.ts),
 * and their curves of one metric overlaid.
 */
import { Chart } from '../chart/chart';
import { comparisonRows, comparisonTable } from './compare';
import { h, replaceChildren, select } from '../dom';
import { alignSeries, metricNames } from '../model/series';
import { isTerminal } from '../model/states';
import { bestTrialId } from '../model/trialTable';
import { isLightTheme } from '../chart/theme';
import type { IExperiment, IMetricReport, ITrial } from '../api/types';

export interface ICompareInput {
  experiment: IExperiment | null;
  /** The selected trials, in id order. */
  trials: ITrial[];
  /** Metric reports of one group, by trial. */
  metricsOf: (group: string) => Map<number, IMetricReport[]>;
}

const GROUPS = ['validation', 'training'] as const;

export class CompareSection {
  readonly node = h('div', { class: 'jp-Det-compare' });
  private _chart = new Chart('line', 'steps', 'metric');
  /** `<group>:<metric>` of the overlaid curves. */
  private _curve = '';
  private _onlyDifferences = false;
  private _input: ICompareInput | null = null;

  render(input: ICompareInput): void {
    this._input = input;
    const { experiment, trials } = input;
    if (trials.length < 2) {
      replaceChildren(
        this.node,
        h(
          'div',
          { class: 'jp-Det-empty' },
          'Select two or more trials to compare them: tick them in the Trials tab, or click their lines in Hyperparameters.'
        )
      );
      this._chart.destroyPlot();
      return;
    }
    const metric = experiment?.searcher?.metric ?? 'loss';
    const smallerIsBetter = experiment?.searcher?.smaller_is_better !== false;
    const best = bestTrialId(trials, metric, smallerIsBetter);
    const light = isLightTheme();
    const rows = comparisonRows(trials, metric, smallerIsBetter);
    const table = comparisonTable(trials, rows, {
      bestTrialId: best,
      light,
      onlyDifferences: this._onlyDifferences
    });

    const options: [string, string][] = [];
    for (const group of GROUPS) {
      for (const name of metricNames([...input.metricsOf(group).values()].flat())) {
        options.push([`${group}:${name}`, `${group} ${name}`]);
      }
    }
    if (!options.some(([value]) => value === this._curve)) {
      const preferred = [`validation:${metric}`, `training:${metric}`, 'training:loss'];
      this._curve =
        preferred.find(p => options.some(([value]) => value === p)) ?? options[0]?.[0] ?? '';
    }
    const [group, name] = this._curve
      ? [
          this._curve.slice(0, this._curve.indexOf(':')),
          this._curve.slice(this._curve.indexOf(':') + 1)
        ]
      : ['validation', metric];
    const ids = trials.map(t => t.id);
    const data = alignSeries(input.metricsOf(group), ids, name);
    this._chart.yLabel = `${group} ${name}`;
    this._chart.emptyText =
      experiment && isTerminal(experiment.state)
        ? 'These trials reported no metrics.'
        : 'No metrics from these trials yet.';
    this._chart.update({
      ...data,
      labels: ids.map(id => `trial ${id}`),
      colorKeys: ids,
      highlight: best === null ? -1 : ids.indexOf(best)
    });
    const picker = select(
      options,
      this._curve,
      value => {
        this._curve = value;
        this._rerender();
      },
      'jp-Det-select jp-Det-compareMetric'
    );
    const onlyDifferences = h('input', {
      class: 'jp-Det-onlyDifferences',
      props: { type: 'checkbox', checked: this._onlyDifferences },
      on: {
        change: () => {
          this._onlyDifferences = onlyDifferences.checked;
          this._rerender();
        }
      }
    });
    replaceChildren(
      this.node,
      h(
        'div',
        { class: 'jp-Det-compareControls' },
        h('span', { class: 'jp-Det-chartTitle' }, `${trials.length} trials`),
        h(
          'label',
          { class: 'jp-Det-checkbox' },
          onlyDifferences,
          'only hyperparameters that differ'
        )
      ),
      h('div', { class: 'jp-Det-tableScroll' }, table),
      h('div', { class: 'jp-Det-chartTitle' }, 'curves: ', picker),
      this._chart.node
    );
  }

  private _rerender(): void {
    if (this._input) {
      this.render(this._input);
    }
  }

  dispose(): void {
    this._chart.dispose();
  }
}

/**
 * The Learning curves section of the experiment view: one chart of training and one of
 * validation metrics for the selected trials, each with a metric picker.
 */
import { Chart } from '../chart/chart';
import { h, replaceChildren, select } from '../dom';
import { alignSeries, metricNames } from '../model/series';
import { isTerminal } from '../model/states';
import type { IExperiment, IMetricReport } from '../api/types';

export interface ICurvesInput {
  experiment: IExperiment | null;
  /** The selected trials, in id order. */
  trialIds: number[];
  /** How many trials the experiment has. */
  totalTrials: number;
  /** Whether the user picked the trials (the hint says "the best ones" otherwise). */
  userSelected: boolean;
  /** The best trial by the searcher metric, highlighted when more than one is plotted. */
  bestTrialId: number | null;
  /** The searcher metric, shown first where a group has it. */
  metric: string;
  /** Metric reports of one group, by trial. */
  metricsOf: (group: string) => Map<number, IMetricReport[]>;
}

type Group = 'training' | 'validation';

export class CurvesSection {
  private _charts: Record<Group, Chart> = {
    training: new Chart('line', 'steps', 'training'),
    validation: new Chart('line', 'steps', 'validation')
  };
  /** The metric shown per group ('' until the first reports). */
  private _metrics: Record<Group, string> = { training: '', validation: '' };

  /**
   * `node`: the section's element, whose children this section owns; `rerender`: draw again
   * from the current data (after the user picks another metric).
   */
  constructor(
    readonly node: HTMLElement,
    private readonly _rerender: () => void
  ) {}

  render(input: ICurvesInput): void {
    const { experiment, trialIds, bestTrialId: best } = input;
    const finished = !!experiment && isTerminal(experiment.state);
    const parts: HTMLElement[] = [];
    for (const group of ['training', 'validation'] as Group[]) {
      const chart = this._charts[group];
      const reports = input.metricsOf(group);
      const names = metricNames([...reports.values()].flat());
      let metric = this._metrics[group];
      if (!names.includes(metric)) {
        metric = names.includes(input.metric)
          ? input.metric
          : names.includes('loss')
            ? 'loss'
            : (names[0] ?? '');
        this._metrics[group] = metric;
      }
      const picker = names.length
        ? select(
            names.map(n => [n, n] as [string, string]),
            metric,
            value => {
              this._metrics[group] = value;
              this._rerender();
            },
            `jp-Det-select jp-Det-metricSelect-${group}`
          )
        : null;
      chart.yLabel = metric ? `${group} ${metric}` : group;
      chart.node.dataset.group = group;
      chart.emptyText = !trialIds.length
        ? 'No trial selected.'
        : finished
          ? `The selected trials reported no ${group} metrics.`
          : `Waiting for the first ${group} metrics…`;
      const data = alignSeries(reports, trialIds, metric);
      chart.update({
        ...data,
        labels: trialIds.map(id => `trial ${id}`),
        colorKeys: trialIds,
        // "Best" of one trial says nothing.
        highlight: best === null || trialIds.length < 2 ? -1 : trialIds.indexOf(best)
      });
      parts.push(
        h(
          'div',
          { class: 'jp-Det-chartBlock' },
          h('div', { class: 'jp-Det-chartTitle' }, `${group} `, picker),
          chart.node
        )
      );
    }
    const total = input.totalTrials;
    const hint = !trialIds.length
      ? h('div', { class: 'jp-Det-empty' }, 'Select trials in the Trials tab to plot them.')
      : trialIds.length < total
        ? h(
            'div',
            { class: 'jp-Det-hint' },
            `Showing ${trialIds.length} of ${total} trials${input.userSelected ? '' : ' (the best ones)'}; pick others in the Trials tab.`
          )
        : null;
    // Keep chart nodes attached (uPlot redraws in place); rebuild only the surroundings.
    replaceChildren(this.node, hint, ...parts);
  }

  dispose(): void {
    this._charts.training.dispose();
    this._charts.validation.dispose();
  }
}

/**
 * The Learning curves section of the experiment view: one chart of training and one of
 * validation metrics for the selected trials, each with a metric picker and PNG/CSV export;
 * above them the controls (x axis: batches, epochs or wall time; smoothing; log y), below them
 * the profiler's system metrics (systemMetricsView.ts).
 */
import { Chart } from '../chart/chart';
import { h, replaceChildren, select } from '../dom';
import {
  X_AXIS_LABELS,
  allPositive,
  availableXAxes,
  smoothSeries,
  xPlacer
} from '../model/curveTransforms';
import { alignSeries, metricNames } from '../model/series';
import { CurveControls, exportButtons, fileName } from './chartControls';
import { SystemMetricsSection } from './systemMetricsView';
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
  private _controls: CurveControls;
  private _system: SystemMetricsSection;
  /** Everything below the controls (the controls stay put: a slider drag survives a redraw). */
  private _body = h('div', { class: 'jp-Det-curvesBody' });

  /**
   * `node`: the section's element, whose children this section owns; `rerender`: draw again
   * from the current data (after the user picks another metric).
   */
  constructor(
    readonly node: HTMLElement,
    private readonly _rerender: () => void
  ) {
    this._controls = new CurveControls(_rerender);
    this._system = new SystemMetricsSection(_rerender);
    replaceChildren(node, this._controls.node, this._body);
  }

  render(input: ICurvesInput): void {
    const { experiment, trialIds, bestTrialId: best } = input;
    const finished = !!experiment && isTerminal(experiment.state);
    const settings = this._controls.settings;
    this._controls.setAxes(
      availableXAxes(
        (['training', 'validation'] as Group[]).flatMap(g =>
          [...input.metricsOf(g).values()].flat()
        )
      )
    );
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
      chart.xLabel = X_AXIS_LABELS[settings.xAxis];
      chart.node.dataset.group = group;
      chart.node.dataset.xAxis = settings.xAxis;
      chart.node.dataset.smoothing = String(settings.smoothing);
      chart.emptyText = !trialIds.length
        ? 'No trial selected.'
        : finished
          ? `The selected trials reported no ${group} metrics.`
          : `Waiting for the first ${group} metrics…`;
      const data = alignSeries(reports, trialIds, metric, xPlacer(reports, settings.xAxis));
      const ys = data.ys.map(y => smoothSeries(y, settings.smoothing));
      chart.update({
        ...data,
        ys,
        yLog: settings.logY,
        labels: trialIds.map(id => `trial ${id}`),
        colorKeys: trialIds,
        // "Best" of one trial says nothing.
        highlight: best === null || trialIds.length < 2 ? -1 : trialIds.indexOf(best)
      });
      parts.push(
        h(
          'div',
          { class: 'jp-Det-chartBlock' },
          h(
            'div',
            { class: 'jp-Det-chartTitle' },
            `${group} `,
            picker,
            settings.logY && ys.length > 0 && !allPositive(ys)
              ? h('span', { class: 'jp-Det-chartNote' }, ' (linear: log y needs positive values)')
              : null,
            exportButtons(chart, () =>
              fileName('experiment', experiment?.id ?? 'unknown', group, this._metrics[group])
            )
          ),
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
    this._system.render({
      experimentId: experiment?.id ?? 0,
      trialIds,
      smoothing: settings.smoothing,
      metricsOf: input.metricsOf
    });
    // Keep chart nodes attached (uPlot redraws in place); rebuild only the surroundings.
    replaceChildren(this._body, hint, ...parts, this._system.node);
  }

  dispose(): void {
    this._system.dispose();
    this._charts.training.dispose();
    this._charts.validation.dispose();
  }
}

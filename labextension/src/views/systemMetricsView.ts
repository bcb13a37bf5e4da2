/**
 * System metrics per trial, under the learning curves: one chart per profiler group (CPU, GPU,
 * memory, disk, network) of the selected trials against wall time, each with a picker of the
 * group's values (a GPU's utilisation or free memory, …) and PNG/CSV export.
 *
 * The profiler (`core_context.profiler.on()`, or `profiling.enabled` with the PyTorch Trainer)
 * reports them as metric groups, which the curves already load for the selected trials.
 */
import { Chart } from '../chart/chart';
import { h, replaceChildren, select } from '../dom';
import {
  SYSTEM_GROUPS,
  X_AXIS_LABELS,
  flattenSystemReports,
  smoothSeries,
  xPlacer
} from '../model/curveTransforms';
import { alignSeries, metricNames } from '../model/series';
import { exportButtons, fileName } from './chartControls';
import type { IMetricReport } from '../api/types';

/** What each group shows first (the profiler's main value of it). */
const PREFERRED: Record<string, string[]> = {
  cpu: ['cpu_util_simple'],
  memory: ['memory_free'],
  gpu: ['gpu_util'],
  disk: ['disk_util', 'disk_iops'],
  network: ['net_throughput_sent', 'net_throughput_recv']
};

const TITLES: Record<string, string> = {
  cpu: 'CPU',
  gpu: 'GPU',
  memory: 'memory',
  disk: 'disk',
  network: 'network'
};

export interface ISystemInput {
  experimentId: number;
  trialIds: number[];
  smoothing: number;
  metricsOf: (group: string) => Map<number, IMetricReport[]>;
}

export class SystemMetricsSection {
  readonly node = h('div', { class: 'jp-Det-systemCharts' });
  private _charts = new Map<string, Chart>();
  private _picked = new Map<string, string>();

  constructor(private readonly _rerender: () => void) {}

  render(input: ISystemInput): void {
    const blocks: HTMLElement[] = [];
    for (const group of SYSTEM_GROUPS) {
      const all = flattenSystemReports(input.metricsOf(group));
      const reports = new Map(
        input.trialIds.filter(id => all.get(id)?.length).map(id => [id, all.get(id)!])
      );
      if (!reports.size) {
        continue;
      }
      const names = metricNames([...reports.values()].flat());
      let name = this._picked.get(group) ?? '';
      if (!names.includes(name)) {
        const preferred = PREFERRED[group] ?? [];
        name =
          names.find(n => preferred.some(p => n === p || n.endsWith(` › ${p}`))) ?? names[0] ?? '';
        this._picked.set(group, name);
      }
      let chart = this._charts.get(group);
      if (!chart) {
        chart = new Chart('line', X_AXIS_LABELS.time, group);
        chart.node.dataset.group = group;
        this._charts.set(group, chart);
      }
      const trialIds = [...reports.keys()];
      const data = alignSeries(reports, trialIds, name, xPlacer(reports, 'time'));
      chart.yLabel = name;
      chart.update({
        ...data,
        ys: data.ys.map(ys => smoothSeries(ys, input.smoothing)),
        labels: trialIds.map(id => `trial ${id}`),
        colorKeys: trialIds
      });
      const picker = select(
        names.map(n => [n, n] as [string, string]),
        name,
        value => {
          this._picked.set(group, value);
          this._rerender();
        },
        `jp-Det-select jp-Det-systemSelect-${group}`
      );
      const exports = exportButtons(chart, () =>
        fileName('experiment', input.experimentId, group, this._picked.get(group) ?? '')
      );
      blocks.push(
        h(
          'div',
          { class: 'jp-Det-chartBlock' },
          h('div', { class: 'jp-Det-chartTitle' }, `${TITLES[group] ?? group} `, picker, exports),
          chart.node
        )
      );
    }
    replaceChildren(
      this.node,
      h('div', { class: 'jp-Det-chartTitle jp-Det-sectionTitle' }, 'System metrics'),
      ...(blocks.length
        ? blocks
        : [
            h(
              'div',
              { class: 'jp-Det-hint' },
              'No system metrics for the selected trials. Turn on the profiler to record CPU, GPU, memory, disk and network: core_context.profiler.on() in a Core API script, or profiling_enabled=True in Trainer.fit().'
            )
          ])
    );
  }

  dispose(): void {
    for (const chart of this._charts.values()) {
      chart.dispose();
    }
  }
}

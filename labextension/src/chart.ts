/**
 * Charts drawn with uPlot (canvas; 100k points draw in a few ms).
 *
 * The chart's container carries `data-points` (the number of drawn values) and
 * `data-series` (the series labels), so tests and users of the DOM can check what is plotted.
 */
import uPlot from 'uplot';

import { h } from './dom';

const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

export function seriesColor(index: number): string {
  return PALETTE[index % PALETTE.length];
}

function countPoints(ys: (number | null)[][]): number {
  let count = 0;
  for (const y of ys) {
    for (const value of y) {
      if (value !== null && value !== undefined) {
        count += 1;
      }
    }
  }
  return count;
}

interface IChartData {
  x: number[];
  ys: (number | null)[][];
  labels: string[];
  /** For a categorical x axis: the label of each integer x. */
  categories?: string[] | null;
}

/** A line chart (learning curves) or a scatter (hparam vs metric), resized with its node. */
export class Chart {
  readonly node: HTMLElement;
  private _plot: uPlot | null = null;
  private _signature = '';
  private _resizeObserver: ResizeObserver;
  private _empty: HTMLElement;

  constructor(
    readonly kind: 'line' | 'scatter',
    private _xLabel: string,
    private _yLabel: string
  ) {
    this._empty = h('div', { class: 'jp-Det-chart-empty' }, 'No data yet.');
    this.node = h('div', { class: 'jp-Det-chart', attrs: { 'data-points': '0', 'data-series': '' } }, this._empty);
    this._resizeObserver = new ResizeObserver(() => this._resize());
    this._resizeObserver.observe(this.node);
  }

  set xLabel(label: string) {
    if (label !== this._xLabel) {
      this._xLabel = label;
      this._signature = '';
    }
  }

  set yLabel(label: string) {
    if (label !== this._yLabel) {
      this._yLabel = label;
      this._signature = ''; // axis labels are fixed at creation: rebuild
    }
  }

  private _size(): { width: number; height: number } {
    const width = Math.max(200, this.node.clientWidth || 600);
    return { width, height: 280 };
  }

  private _resize(): void {
    if (this._plot && this.node.clientWidth > 0) {
      this._plot.setSize(this._size());
    }
  }

  update(data: IChartData): void {
    const points = countPoints(data.ys);
    this.node.setAttribute('data-points', String(points));
    this.node.setAttribute('data-series', data.labels.join(','));
    if (!data.x.length || !data.ys.length) {
      this.destroyPlot();
      if (!this._empty.isConnected) {
        this.node.appendChild(this._empty);
      }
      return;
    }
    this._empty.remove();
    const aligned = [data.x, ...data.ys] as uPlot.AlignedData;
    const signature = [this.kind, this._yLabel, ...data.labels, data.categories?.join('|') ?? ''].join('\u0000');
    if (this._plot && signature === this._signature) {
      this._plot.setData(aligned);
      return;
    }
    this.destroyPlot();
    this._signature = signature;
    this._plot = new uPlot(this._options(data), aligned, this.node);
  }

  private _options(data: IChartData): uPlot.Options {
    const scatter = this.kind === 'scatter';
    const series: uPlot.Series[] = [{ label: this._xLabel }];
    data.labels.forEach((label, i) => {
      series.push({
        label,
        stroke: seriesColor(i),
        width: scatter ? 0 : 1.5,
        spanGaps: true,
        points: scatter ? { show: true, size: 8, fill: seriesColor(i) } : { show: false },
        paths: scatter ? () => null : undefined
      });
    });
    const categories = data.categories;
    const xAxis: uPlot.Axis = { label: this._xLabel };
    if (categories) {
      xAxis.splits = () => categories.map((_, i) => i);
      xAxis.values = (_u, splits) => splits.map(i => categories[i] ?? '');
    }
    return {
      ...this._size(),
      scales: {
        x: categories
          ? { time: false, range: () => [-0.5, categories.length - 0.5] }
          : { time: false }
      },
      axes: [xAxis, { label: this._yLabel }],
      series,
      legend: { show: true },
      cursor: { drag: { x: true, y: false } }
    };
  }

  destroyPlot(): void {
    if (this._plot) {
      this._plot.destroy();
      this._plot = null;
      this._signature = '';
    }
  }

  dispose(): void {
    this._resizeObserver.disconnect();
    this.destroyPlot();
  }
}

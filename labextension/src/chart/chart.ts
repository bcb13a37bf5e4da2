/**
 * Charts drawn with uPlot (canvas; 100k points draw in a few ms): learning curves (lines) and
 * hyperparameter-vs-metric scatters.
 *
 * What they do for the reader: markers where a series is sparse (a single validation is drawn,
 * not lost), ranges that hold the data and never push a non-negative metric below 0, a log x
 * axis for log-sampled hyperparameters with ticks like `1e-4`, the legend under the plot with
 * the values at the cursor, the best trial drawn thicker, and the colours of the JupyterLab
 * theme (redrawn when it changes).
 *
 * A NaN or ±Infinity a diverged run reported is no number to place: its line breaks there (a
 * gap) and a marker (a triangle at the plot's top for NaN and Infinity, at its bottom for
 * -Infinity) shows the step; the legend says "NaN" at it.
 *
 * The chart's container carries `data-points` (the number of drawn values), `data-series`
 * (the series labels) and `data-nonfinite` (the non-finite points marked), so tests and users
 * of the DOM can check what is plotted.
 */
import uPlot from 'uplot';

import {
  INTEGER_INCRS,
  countPresent,
  formatTicks,
  logTicks,
  nearestPresent,
  paddedRange,
  showMarkers,
  stepRange
} from './chartMath';
import { h } from '../dom';
import { allPositive } from '../model/curveTransforms';
import { formatNumber } from '../model/format';
import type { INonFinitePoint } from '../model/series';
import { IChartTheme, onThemeChange, readChartTheme, trialColor } from './theme';

/** A series colour by position (for charts whose series are not trials). */
export function seriesColor(index: number, light = true): string {
  return trialColor(index + 1, light);
}

function countPoints(ys: (number | null | undefined)[][]): number {
  let count = 0;
  for (const y of ys) {
    count += countPresent(y);
  }
  return count;
}

export interface IChartData {
  x: number[];
  /** Per series: a value, null for a gap (a non-finite value), undefined where it has none. */
  ys: (number | null | undefined)[][];
  /** Line charts: the non-finite points, drawn as gaps with a marker. */
  nonFinite?: INonFinitePoint[];
  labels: string[];
  /** For a categorical x axis: the label of each integer x. */
  categories?: string[] | null;
  /** The key of each series' colour (a trial id, so a trial keeps its colour everywhere). */
  colorKeys?: number[];
  /** Line charts: the series drawn thicker and marked best (the best trial); -1 or absent: none. */
  highlight?: number;
  /** A log x axis (a hyperparameter of type `log`); ignored unless every x is positive. */
  xLog?: boolean;
  /** Scatter: what each point is (e.g. `trial 12`), shown on hover. */
  pointLabels?: string[];
  /** Scatter: the point drawn emphasised (the best trial), or -1. */
  highlightPoint?: number;
  /** A log y axis (the curves' log-y control); ignored unless every value is positive. */
  yLog?: boolean;
  /** Line charts: series drawn as points only (each trial's value beside the best so far). */
  pointsOnly?: number[];
}

const PLOT_HEIGHT = 240;

/** A line chart (learning curves) or a scatter (hparam vs metric), resized with its node. */
export class Chart {
  readonly node: HTMLElement;
  private _plot: uPlot | null = null;
  private _signature = '';
  /** `${uPlot series index}:${x index}` -> the non-finite value there (the legend's text). */
  private _nonFiniteAt = new Map<string, number>();
  private _resizeObserver: ResizeObserver;
  private _empty: HTMLElement;
  private _plotHost: HTMLElement;
  private _legendHost: HTMLElement;
  private _tooltip: HTMLElement;
  private _data: IChartData | null = null;
  private _disconnectTheme: () => void;
  private _emptyText = 'No data yet.';

  constructor(
    readonly kind: 'line' | 'scatter',
    private _xLabel: string,
    private _yLabel: string
  ) {
    this._empty = h('div', { class: 'jp-Det-chart-empty' }, this._emptyText);
    this._plotHost = h('div', { class: 'jp-Det-chart-plot' });
    this._legendHost = h('div', { class: 'jp-Det-chart-legend' });
    this._tooltip = h('div', { class: 'jp-Det-chart-tooltip', attrs: { role: 'tooltip' } });
    this._tooltip.hidden = true;
    this.node = h(
      'div',
      {
        class: `jp-Det-chart jp-Det-chart-${kind}`,
        attrs: { 'data-points': '0', 'data-series': '', 'data-nonfinite': '0' }
      },
      this._empty
    );
    this._resizeObserver = new ResizeObserver(() => this._resize());
    this._resizeObserver.observe(this.node);
    this._disconnectTheme = onThemeChange(() => this.redraw());
  }

  get xLabel(): string {
    return this._xLabel;
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

  /** What the chart says while it has nothing to draw (it depends on the experiment's state). */
  set emptyText(text: string) {
    this._emptyText = text;
    this._empty.textContent = text;
  }

  private _size(): { width: number; height: number } {
    const width = Math.max(240, this.node.clientWidth || 600);
    return { width, height: PLOT_HEIGHT };
  }

  private _resize(): void {
    if (this._plot && this.node.clientWidth > 0) {
      const size = this._size();
      if (size.width !== this._plot.width) {
        this._plot.setSize(size);
      }
    }
  }

  /** Rebuild with the current theme's colours (after a theme switch). */
  redraw(): void {
    if (this._data) {
      this._signature = '';
      this.update(this._data);
    }
  }

  /** The x labels as drawn, also kept in `data-x-ticks` (the canvas has no text to read). */
  private _xTickLabels(labels: string[]): string[] {
    this.node.setAttribute('data-x-ticks', labels.join('|'));
    return labels;
  }

  update(data: IChartData): void {
    this._data = data;
    const points = countPoints(data.ys);
    this.node.setAttribute('data-points', String(points));
    this.node.setAttribute('data-series', data.labels.join(','));
    this.node.setAttribute('data-nonfinite', String(data.nonFinite?.length ?? 0));
    this.node.setAttribute('data-y-log', String(this._yLog(data)));
    this._nonFiniteAt = new Map(
      (data.nonFinite ?? []).map(p => [`${p.series + 1}:${p.index}`, p.value])
    );
    if (!data.x.length || !data.ys.length || points === 0) {
      this.destroyPlot();
      const diverged = data.nonFinite?.length ?? 0;
      // Reports came, but none is a number to draw: say so rather than "waiting".
      this._empty.textContent = diverged
        ? `All ${diverged} reported values are NaN or Infinity.`
        : this._emptyText;
      if (!this._empty.isConnected) {
        this.node.appendChild(this._empty);
      }
      return;
    }
    this._empty.remove();
    if (!this._plotHost.isConnected) {
      this.node.append(this._plotHost, this._legendHost, this._tooltip);
    }
    const xLog = this._xLog(data);
    const aligned = this._alignedData(data);
    const theme = readChartTheme();
    const signature = [
      this.kind,
      this._xLabel,
      this._yLabel,
      xLog,
      this._yLog(data),
      data.pointsOnly?.join(',') ?? '',
      data.highlight ?? -1,
      data.colorKeys?.join(',') ?? '',
      theme.light,
      theme.text,
      ...data.labels,
      data.categories?.join('|') ?? '',
      this.kind === 'scatter' ? `best:${data.highlightPoint ?? -1}` : ''
    ].join('\u0000');
    if (this._plot && signature === this._signature) {
      this._plot.setData(aligned);
      return;
    }
    this.destroyPlot();
    this._signature = signature;
    this._plot = new uPlot(this._options(data, theme, xLog), aligned, this._plotHost);
  }

  private _yLog(data: IChartData): boolean {
    return !!data.yLog && allPositive(data.ys);
  }

  /** What is drawn now (the CSV export writes it), or null. */
  get data(): IChartData | null {
    return this._data;
  }

  /**
   * The plot as a PNG data URL (axes and lines: uPlot draws them on its canvas) on the theme's
   * background (the canvas itself is transparent), or null.
   */
  toPNG(): string | null {
    const source = this._plot?.ctx.canvas;
    if (!source) {
      return null;
    }
    const copy = document.createElement('canvas');
    copy.width = source.width;
    copy.height = source.height;
    const ctx = copy.getContext('2d')!;
    ctx.fillStyle = readChartTheme().background;
    ctx.fillRect(0, 0, copy.width, copy.height);
    ctx.drawImage(source, 0, 0);
    return copy.toDataURL('image/png');
  }

  private _xLog(data: IChartData): boolean {
    return !!data.xLog && !data.categories && data.x.length > 0 && data.x.every(x => x > 0);
  }

  /** The data uPlot draws: for a scatter, the best point again as its own (emphasised) series. */
  private _alignedData(data: IChartData): uPlot.AlignedData {
    const best = data.highlightPoint ?? -1;
    if (this.kind === 'scatter' && best >= 0 && data.ys.length) {
      const overlay = data.x.map((_, i) => (i === best ? data.ys[0][i] : null));
      return [data.x, ...data.ys, overlay] as uPlot.AlignedData;
    }
    return [data.x, ...data.ys] as uPlot.AlignedData;
  }

  private _color(data: IChartData, index: number, theme: IChartTheme): string {
    const key = data.colorKeys?.[index];
    return key === undefined ? seriesColor(index, theme.light) : trialColor(key, theme.light);
  }

  private _options(data: IChartData, theme: IChartTheme, xLog: boolean): uPlot.Options {
    const scatter = this.kind === 'scatter';
    const font = `11px ${theme.fontFamily}`;
    const labelFont = `12px ${theme.fontFamily}`;
    const series: uPlot.Series[] = [
      {
        label: this._xLabel,
        value: (_u, value) =>
          value === null || value === undefined ? '—' : this._formatX(value, data)
      }
    ];
    const highlight = data.highlight ?? -1;
    const colors: string[] = [theme.text];
    data.labels.forEach((label, i) => {
      const color = scatter ? theme.palette[0] : this._color(data, i, theme);
      colors.push(color);
      const best = !scatter && i === highlight;
      const dots = scatter || !!data.pointsOnly?.includes(i);
      series.push({
        label: best ? `${label} ★ best` : label,
        stroke: color,
        width: dots ? 0 : best ? 3 : 1.5,
        // undefined (no report at a step) is spanned; null (a NaN/Infinity) breaks the line.
        spanGaps: false,
        value: (_u, value, seriesIdx, idx) => {
          if (value !== null && value !== undefined) {
            return formatNumber(value);
          }
          const nonFinite = this._nonFiniteAt.get(`${seriesIdx}:${idx}`);
          return nonFinite === undefined ? '—' : formatNumber(nonFinite);
        },
        points: dots
          ? { show: true, size: scatter ? 8 : 6, width: 1, stroke: color, fill: `${color}99` }
          : {
              show: (u, seriesIdx, idx0, idx1) =>
                showMarkers(
                  countPresent(u.data[seriesIdx] as (number | null | undefined)[], idx0, idx1),
                  u.over.clientWidth || u.width
                ),
              size: best ? 8 : 6,
              width: 1.5,
              stroke: color,
              fill: color
            },
        paths: dots ? () => null : undefined
      });
    });
    if (scatter && (data.highlightPoint ?? -1) >= 0) {
      const color = theme.palette[1];
      colors.push(color);
      series.push({
        label: `best (${data.pointLabels?.[data.highlightPoint!] ?? 'trial'})`,
        stroke: color,
        width: 0,
        value: (_u, value) => (value === null || value === undefined ? '—' : formatNumber(value)),
        points: { show: true, size: 13, width: 2.5, stroke: color, fill: `${color}55` },
        paths: () => null
      });
    }
    const categories = data.categories;
    const axisStyle = {
      stroke: theme.textMuted,
      font,
      labelFont,
      grid: { stroke: theme.grid, width: 1 },
      ticks: { stroke: theme.axis, width: 1, size: 4 }
    };
    const xAxis: uPlot.Axis = { ...axisStyle, label: this._xLabel, labelSize: 16, size: 30 };
    if (categories) {
      xAxis.splits = () => categories.map((_, i) => i);
      xAxis.values = (_u, splits) => splits.map(i => categories[i] ?? '');
    } else if (xLog) {
      xAxis.splits = (_u, _axis, min, max) => logTicks(min, max);
      // logTicks already chose ticks that fit; uPlot's default log filter would replace every
      // 2 and 5 of a 1-2-5 axis by null, which labelled them "null" (issue 28, item 3).
      xAxis.filter = (_u, splits) => splits;
      xAxis.values = (_u, splits) => this._xTickLabels(formatTicks(splits));
      xAxis.space = 30;
    } else {
      xAxis.values = (_u, splits) => this._xTickLabels(formatTicks(splits));
      if (data.x.every(x => Number.isInteger(x))) {
        xAxis.incrs = INTEGER_INCRS;
      }
    }
    const yAxis: uPlot.Axis = {
      ...axisStyle,
      label: this._yLabel,
      labelSize: 20,
      values: (_u, splits) => formatTicks(splits),
      size: (u, values) => {
        if (!values?.length) {
          return 40;
        }
        u.ctx.font = font;
        const widest =
          Math.max(...values.map(v => u.ctx.measureText(String(v)).width)) / (uPlot.pxRatio || 1);
        return Math.ceil(widest) + 14;
      }
    };
    if (this._yLog(data)) {
      // As for a log x axis: our ticks, and no uPlot filter turning labels into "null".
      yAxis.splits = (_u, _axis, min, max) => logTicks(min, max);
      yAxis.filter = (_u, splits) => splits;
    }
    const xScale: uPlot.Scale = categories
      ? { time: false, range: () => [-0.5, categories.length - 0.5] }
      : xLog
        ? {
            time: false,
            distr: 3,
            log: 10,
            range: (_u, min, max) => paddedRange(min, max, { log: true })
          }
        : scatter
          ? { time: false, range: (_u, min, max) => paddedRange(min, max) }
          : { time: false, range: (_u, min, max) => stepRange(min, max) };
    return {
      ...this._size(),
      scales: {
        x: xScale,
        y: this._yLog(data)
          ? { distr: 3, log: 10, range: (_u, min, max) => paddedRange(min, max, { log: true }) }
          : { range: (_u, min, max) => paddedRange(min, max) }
      },
      axes: [xAxis, yAxis],
      series,
      legend: {
        show: true,
        live: !scatter,
        markers: { width: 2, fill: (_u, seriesIdx) => colors[seriesIdx] ?? theme.text },
        mount: (_u, element) => this._legendHost.replaceChildren(element)
      },
      cursor: {
        drag: { x: !categories, y: false },
        points: { size: 7, width: 2, fill: theme.background },
        dataIdx: (u, seriesIdx, closestIdx, xValue) =>
          seriesIdx === 0
            ? closestIdx
            : nearestPresent(u.data[seriesIdx] as (number | null)[], u.data[0], closestIdx, xValue)
      },
      hooks: scatter
        ? { setCursor: [u => this._scatterTooltip(u)] }
        : { draw: [u => this._drawNonFinite(u, colors)] }
    };
  }

  /** A triangle at each non-finite point's step: at the top (NaN, Infinity) or bottom. */
  private _drawNonFinite(u: uPlot, colors: string[]): void {
    const points = this._data?.nonFinite ?? [];
    if (!points.length) {
      return;
    }
    const ratio = uPlot.pxRatio || 1;
    const size = 5 * ratio;
    const { ctx } = u;
    const top = u.bbox.top + size;
    const bottom = u.bbox.top + u.bbox.height - size;
    ctx.save();
    for (const point of points) {
      const step = u.data[0][point.index];
      if (step === undefined) {
        continue;
      }
      const x = u.valToPos(step, 'x', true);
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) {
        continue; // zoomed out of view
      }
      const down = point.value === -Infinity;
      const y = down ? bottom : top;
      ctx.beginPath();
      // Pointing the way the value went off the chart (NaN: up, as a loss diverging).
      ctx.moveTo(x - size, down ? y - size : y + size);
      ctx.lineTo(x + size, down ? y - size : y + size);
      ctx.lineTo(x, down ? y + size : y - size);
      ctx.closePath();
      ctx.fillStyle = colors[point.series + 1] ?? '#d33';
      ctx.strokeStyle = '#d33';
      ctx.lineWidth = ratio;
      ctx.fill();
      ctx.stroke();
    }
    ctx.restore();
  }

  private _formatX(value: number, data: IChartData): string {
    if (data.categories) {
      return data.categories[Math.round(value)] ?? '';
    }
    return formatNumber(value);
  }

  /** The scatter's hover: the point nearest the cursor (in pixels), named with its trial. */
  private _scatterTooltip(u: uPlot): void {
    const data = this._data;
    const left = u.cursor.left ?? -1;
    const top = u.cursor.top ?? -1;
    if (!data || left < 0 || top < 0) {
      this._tooltip.hidden = true;
      return;
    }
    let nearest = -1;
    let distance = Infinity;
    const ys = data.ys[0] ?? [];
    for (let i = 0; i < data.x.length; i++) {
      const y = ys[i];
      if (y === null || y === undefined) {
        continue;
      }
      const dx = u.valToPos(data.x[i], 'x') - left;
      const dy = u.valToPos(y, 'y') - top;
      const d = dx * dx + dy * dy;
      if (d < distance) {
        distance = d;
        nearest = i;
      }
    }
    if (nearest < 0 || distance > 24 * 24) {
      this._tooltip.hidden = true;
      return;
    }
    const label = data.pointLabels?.[nearest] ?? `point ${nearest + 1}`;
    this._tooltip.textContent = `${label}: ${this._xLabel} ${this._formatX(data.x[nearest], data)}, ${this._yLabel} ${formatNumber(ys[nearest] as number)}`;
    this._tooltip.hidden = false;
    const x = u.valToPos(data.x[nearest], 'x') + u.over.offsetLeft;
    const y = u.valToPos(ys[nearest] as number, 'y') + u.over.offsetTop;
    const flip = x > (u.over.offsetLeft + u.over.clientWidth) * 0.6;
    this._tooltip.style.left = flip ? '' : `${x + 12}px`;
    this._tooltip.style.right = flip ? `${this.node.clientWidth - x + 12}px` : '';
    this._tooltip.style.top = `${Math.max(0, y - 28)}px`;
  }

  destroyPlot(): void {
    if (this._plot) {
      this._plot.destroy();
      this._plot = null;
      this._signature = '';
      this._legendHost.replaceChildren();
      this._tooltip.hidden = true;
    }
  }

  dispose(): void {
    this._resizeObserver.disconnect();
    this._disconnectTheme();
    this.destroyPlot();
  }
}

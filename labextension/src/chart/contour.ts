/**
 * The contour plot of a search: the searcher metric over two hyperparameters, interpolated
 * between the trials (model/searchAnalysis.ts) and drawn as a heat map on a canvas, with each
 * trial a dot (the best one ringed) and a colour bar. Bright is better, whichever way the
 * metric improves, in the theme's ramp (theme.ts).
 *
 * Its node carries `data-x`, `data-y`, `data-points` and `data-x-log`/`data-y-log` (what is
 * drawn), as the charts do, since a canvas has no text to read.
 */
import { formatTicks, logTicks } from './chartMath';
import { h } from '../dom';
import { formatNumber } from '../model/format';
import { IContourPoint, interpolateGrid } from '../model/searchAnalysis';
import { onThemeChange, rampColor, readChartTheme } from './theme';

export interface IContourData {
  points: IContourPoint[];
  xName: string;
  yName: string;
  xLog: boolean;
  yLog: boolean;
  metric: string;
  smallerIsBetter: boolean;
  /** The best trial's id (ringed), or null. */
  bestTrialId: number | null;
}

const HEIGHT = 300;
const GRID = 48;
const MARGIN = { left: 58, right: 74, top: 10, bottom: 40 };

/** Ticks across [lo, hi] (in axis units: exponents on a log axis). */
function ticksFor(lo: number, hi: number, log: boolean): number[] {
  if (log) {
    return logTicks(Math.pow(10, lo), Math.pow(10, hi), 6).map(v => Math.log10(v));
  }
  if (!(hi > lo)) {
    return [lo];
  }
  // Round steps (1, 2 or 5 times a power of ten), about five of them, inside the range.
  const rough = (hi - lo) / 5;
  const power = Math.pow(10, Math.floor(Math.log10(rough)));
  const step = [1, 2, 5, 10].map(m => m * power).find(s => s >= rough) ?? 10 * power;
  const ticks: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  }
  return ticks;
}

export class ContourPlot {
  readonly node = h('div', {
    class: 'jp-Det-contourPlot',
    attrs: { 'data-points': '0' }
  });
  private _canvas = h('canvas', { class: 'jp-Det-contourCanvas' });
  private _tooltip = h('div', { class: 'jp-Det-chart-tooltip', attrs: { role: 'tooltip' } });
  private _data: IContourData | null = null;
  /** Dots in CSS pixels, for the hover. */
  private _dots: { x: number; y: number; point: IContourPoint }[] = [];
  private _resize = new ResizeObserver(() => this.draw());
  private _disconnectTheme = onThemeChange(() => this.draw());

  constructor() {
    this._tooltip.hidden = true;
    this.node.append(this._canvas, this._tooltip);
    this._resize.observe(this.node);
    this._canvas.addEventListener('mousemove', event => this._hover(event));
    this._canvas.addEventListener('mouseleave', () => (this._tooltip.hidden = true));
  }

  update(data: IContourData): void {
    this._data = data;
    this.node.dataset.x = data.xName;
    this.node.dataset.y = data.yName;
    this.node.dataset.points = String(data.points.length);
    this.node.dataset.xLog = String(data.xLog);
    this.node.dataset.yLog = String(data.yLog);
    this.draw();
  }

  /** The plot as a PNG data URL. */
  toPNG(): string {
    return this._canvas.toDataURL('image/png');
  }

  draw(): void {
    const data = this._data;
    if (!data || !data.points.length) {
      return;
    }
    const theme = readChartTheme();
    const width = Math.max(320, this.node.clientWidth || 600);
    const ratio = window.devicePixelRatio || 1;
    this._canvas.width = width * ratio;
    this._canvas.height = HEIGHT * ratio;
    this._canvas.style.width = `${width}px`;
    this._canvas.style.height = `${HEIGHT}px`;
    const ctx = this._canvas.getContext('2d');
    if (!ctx) {
      return;
    }
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    // Opaque, so an exported PNG reads on any viewer's background.
    ctx.fillStyle = theme.background;
    ctx.fillRect(0, 0, width, HEIGHT);
    const tx = (v: number) => (data.xLog ? Math.log10(v) : v);
    const ty = (v: number) => (data.yLog ? Math.log10(v) : v);
    const xs = data.points.map(p => tx(p.x));
    const ys = data.points.map(p => ty(p.y));
    const { cells, min, max, xRange, yRange } = interpolateGrid(
      data.points,
      GRID,
      data.xLog,
      data.yLog,
      0.04
    );
    const [x0, x1] = xRange;
    const [y0, y1] = yRange;
    const plotW = width - MARGIN.left - MARGIN.right;
    const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
    const px = (v: number) => MARGIN.left + (x1 > x0 ? ((v - x0) / (x1 - x0)) * plotW : plotW / 2);
    const py = (v: number) =>
      MARGIN.top + plotH - (y1 > y0 ? ((v - y0) / (y1 - y0)) * plotH : plotH / 2);
    // 1 is the best value, whichever way the metric improves.
    const goodness = (v: number) =>
      max > min ? (data.smallerIsBetter ? (max - v) / (max - min) : (v - min) / (max - min)) : 0.5;
    const cellW = plotW / GRID;
    const cellH = plotH / GRID;
    cells.forEach((row, r) =>
      row.forEach((value, c) => {
        ctx.fillStyle = rampColor(goodness(value), theme.light);
        // +1: no hairline gaps between cells.
        ctx.fillRect(
          MARGIN.left + c * cellW,
          MARGIN.top + plotH - (r + 1) * cellH,
          cellW + 1,
          cellH + 1
        );
      })
    );
    ctx.strokeStyle = theme.axis;
    ctx.strokeRect(MARGIN.left, MARGIN.top, plotW, plotH);
    // The trials.
    this._dots = data.points.map((point, i) => ({ x: px(xs[i]), y: py(ys[i]), point }));
    for (const dot of this._dots) {
      const best = dot.point.trialId === data.bestTrialId;
      ctx.beginPath();
      ctx.arc(dot.x, dot.y, best ? 6 : 4, 0, 2 * Math.PI);
      ctx.fillStyle = theme.light ? '#ffffff' : '#111111';
      ctx.fill();
      ctx.lineWidth = best ? 2.5 : 1.5;
      ctx.strokeStyle = best ? theme.palette[1] : theme.text;
      ctx.stroke();
    }
    // Axes.
    ctx.font = `11px ${theme.fontFamily}`;
    ctx.fillStyle = theme.textMuted;
    const xTicks = ticksFor(x0, x1, data.xLog);
    const xLabels = formatTicks(xTicks.map(v => (data.xLog ? Math.pow(10, v) : v)));
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    xTicks.forEach((v, i) => ctx.fillText(xLabels[i], px(v), MARGIN.top + plotH + 4));
    const yTicks = ticksFor(y0, y1, data.yLog);
    const yLabels = formatTicks(yTicks.map(v => (data.yLog ? Math.pow(10, v) : v)));
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    yTicks.forEach((v, i) => ctx.fillText(yLabels[i], MARGIN.left - 4, py(v)));
    ctx.font = `12px ${theme.fontFamily}`;
    ctx.fillStyle = theme.text;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'bottom';
    ctx.fillText(data.xName, MARGIN.left + plotW / 2, HEIGHT - 2);
    ctx.save();
    ctx.translate(12, MARGIN.top + plotH / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textBaseline = 'middle';
    ctx.fillText(data.yName, 0, 0);
    ctx.restore();
    // The colour bar: best at the top.
    const barX = width - MARGIN.right + 14;
    for (let i = 0; i < plotH; i++) {
      ctx.fillStyle = rampColor(1 - i / plotH, theme.light);
      ctx.fillRect(barX, MARGIN.top + i, 12, 1.5);
    }
    const [top, bottom] = data.smallerIsBetter ? [min, max] : [max, min];
    ctx.font = `11px ${theme.fontFamily}`;
    ctx.fillStyle = theme.textMuted;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'top';
    ctx.fillText(formatNumber(top, 3), barX + 15, MARGIN.top);
    ctx.textBaseline = 'bottom';
    ctx.fillText(formatNumber(bottom, 3), barX + 15, MARGIN.top + plotH);
  }

  private _hover(event: MouseEvent): void {
    const rect = this._canvas.getBoundingClientRect();
    const x = event.clientX - rect.left;
    const y = event.clientY - rect.top;
    let nearest: (typeof this._dots)[number] | null = null;
    let distance = 12 * 12;
    for (const dot of this._dots) {
      const d = (dot.x - x) ** 2 + (dot.y - y) ** 2;
      if (d < distance) {
        distance = d;
        nearest = dot;
      }
    }
    const data = this._data;
    if (!nearest || !data) {
      this._tooltip.hidden = true;
      return;
    }
    const p = nearest.point;
    this._tooltip.textContent = `trial ${p.trialId}: ${data.xName} ${formatNumber(p.x)}, ${data.yName} ${formatNumber(p.y)}, ${data.metric} ${formatNumber(p.value)}`;
    this._tooltip.hidden = false;
    this._tooltip.style.left = `${nearest.x + 12}px`;
    this._tooltip.style.top = `${Math.max(0, nearest.y - 28)}px`;
  }

  dispose(): void {
    this._resize.disconnect();
    this._disconnectTheme();
  }
}

/**
 * The learning curves' controls (smoothing, log y, the x axis) and the PNG/CSV export buttons
 * every chart block carries.
 */
import { Chart } from '../chart/chart';
import { h, replaceChildren } from '../dom';
import { X_AXIS_LABELS, XAxis, seriesCsv } from '../model/curveTransforms';

export interface ICurveSettings {
  /** The EMA weight, 0 (none) .. 0.99. */
  smoothing: number;
  logY: boolean;
  xAxis: XAxis;
}

/** Save `url` (a data or blob URL) as a file named `name` (the browser's download). */
export function download(name: string, url: string): void {
  const link = h('a', { attrs: { href: url, download: name } });
  link.style.display = 'none';
  document.body.appendChild(link);
  link.click();
  link.remove();
}

/** A file name from free text (a metric may be called `val/loss`). */
export function fileName(...parts: (string | number)[]): string {
  return parts
    .map(part => String(part).replace(/[^A-Za-z0-9._-]+/g, '_'))
    .filter(Boolean)
    .join('-');
}

/** "PNG" and "CSV" buttons for one chart: the picture as drawn, the series as shown. */
export function exportButtons(
  chart: Pick<Chart, 'toPNG' | 'data' | 'xLabel'>,
  name: () => string
): HTMLElement {
  const png = h(
    'button',
    {
      class: 'jp-Det-button jp-Det-exportPng',
      attrs: { title: 'Save the chart as a PNG image' },
      on: {
        click: () => {
          const url = chart.toPNG();
          if (url) {
            download(`${name()}.png`, url);
          }
        }
      }
    },
    'PNG'
  );
  const csv = h(
    'button',
    {
      class: 'jp-Det-button jp-Det-exportCsv',
      attrs: { title: 'Save the plotted series as CSV (smoothed if smoothing is on)' },
      on: {
        click: () => {
          const data = chart.data;
          if (!data) {
            return;
          }
          const text = seriesCsv(chart.xLabel, data.x, data.labels, data.ys, data.nonFinite);
          const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
          download(`${name()}.csv`, url);
          setTimeout(() => URL.revokeObjectURL(url), 10_000);
        }
      }
    },
    'CSV'
  );
  return h('span', { class: 'jp-Det-exports' }, png, csv);
}

/** The toolbar above the learning curves; its node stays put so a slider drag is not lost. */
export class CurveControls {
  readonly settings: ICurveSettings = { smoothing: 0, logY: false, xAxis: 'steps' };
  readonly node: HTMLElement;
  private _axis = h('select', {
    class: 'jp-Det-select jp-Det-xAxisSelect',
    attrs: { 'aria-label': 'x axis' },
    on: {
      change: () => {
        this.settings.xAxis = this._axis.value as XAxis;
        this._onChange();
      }
    }
  });
  private _axes = '';
  private _smoothingValue = h('span', { class: 'jp-Det-smoothingValue' }, '0');

  constructor(private readonly _onChange: () => void) {
    const slider = h('input', {
      class: 'jp-Det-smoothing',
      attrs: { type: 'range', min: '0', max: '0.99', step: '0.01', 'aria-label': 'smoothing' },
      props: { value: '0' },
      on: {
        input: () => {
          this.settings.smoothing = Number(slider.value);
          this._smoothingValue.textContent = slider.value;
          this._onChange();
        }
      }
    });
    const logY = h('input', {
      class: 'jp-Det-logY',
      attrs: { type: 'checkbox' },
      on: {
        change: () => {
          this.settings.logY = logY.checked;
          this._onChange();
        }
      }
    });
    this.node = h(
      'div',
      { class: 'jp-Det-curveControls' },
      h('label', {}, 'x axis ', this._axis),
      h(
        'label',
        { attrs: { title: 'Exponential moving average, as TensorBoard smooths' } },
        'smoothing ',
        slider,
        this._smoothingValue
      ),
      h(
        'label',
        { attrs: { title: 'A logarithmic y axis (when every value is positive)' } },
        logY,
        ' log y'
      )
    );
  }

  /** Offer these x axes (epochs only when reports carry them); falls back to batches. */
  setAxes(axes: XAxis[]): void {
    if (!axes.includes(this.settings.xAxis)) {
      this.settings.xAxis = 'steps';
    }
    const key = `${axes.join(',')}:${this.settings.xAxis}`;
    if (key === this._axes) {
      return;
    }
    this._axes = key;
    replaceChildren(
      this._axis,
      ...axes.map(axis =>
        h(
          'option',
          { props: { value: axis, selected: axis === this.settings.xAxis } },
          X_AXIS_LABELS[axis]
        )
      )
    );
  }
}

/**
 * Parallel coordinates of a search: one vertical axis per hyperparameter and one for the
 * searcher metric, one line per trial, coloured by its metric (as optuna-dashboard and W&B
 * draw them). Log-sampled hyperparameters get log axes, categorical ones category axes.
 *
 * The model (axes, positions, colours) is plain functions in parcoordsModel.ts the unit tests
 * run under node; this view draws it as SVG, shows the trial under the pointer, and reports
 * clicks (to select trials for comparison).
 */
import { h } from '../dom';
import { formatMetric } from '../model/format';
import { IParcoordsLine, IParcoordsModel, axisTicks, parcoordsModel } from './parcoordsModel';
import { trialDisplayState } from '../model/states';
import { flattenHparams } from '../model/trialTable';
import { isLightTheme, onThemeChange, rampColor } from './theme';
import type { ITrial } from '../api/types';

const SVG = 'http://www.w3.org/2000/svg';

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number> = {}
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    element.setAttribute(name, String(value));
  }
  return element;
}

function shorten(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export interface IParcoordsInput {
  trials: ITrial[];
  hparams: string[];
  metric: string;
  config: Record<string, unknown> | null | undefined;
  smallerIsBetter: boolean;
  /** Trials selected for comparison (drawn emphasised). */
  selected: Set<number>;
}

const HEIGHT = 300;
const MARGIN = { top: 34, right: 56, bottom: 14, left: 64 };

/** The parallel-coordinates view; `onToggle` hears clicks on a trial's line. */
export class ParallelCoordinates {
  readonly node: HTMLElement;
  private _svgHost = h('div', { class: 'jp-Det-parcoords-plot' });
  private _tooltip = h('div', { class: 'jp-Det-chart-tooltip', attrs: { role: 'tooltip' } });
  private _legend = h('div', { class: 'jp-Det-parcoords-legend' });
  private _input: IParcoordsInput | null = null;
  private _width = 0;
  private _resizeObserver: ResizeObserver;
  private _disconnectTheme: () => void;

  constructor(private readonly _onToggle: (trialId: number) => void) {
    this._tooltip.hidden = true;
    this.node = h('div', { class: 'jp-Det-parcoords' }, this._svgHost, this._tooltip, this._legend);
    this._resizeObserver = new ResizeObserver(() => {
      if (this.node.clientWidth && this.node.clientWidth !== this._width) {
        this._render();
      }
    });
    this._resizeObserver.observe(this.node);
    this._disconnectTheme = onThemeChange(() => this._render());
  }

  update(input: IParcoordsInput): void {
    this._input = input;
    this._render();
  }

  private _render(): void {
    const input = this._input;
    if (!input) {
      return;
    }
    const model = parcoordsModel(
      input.trials,
      input.hparams,
      input.metric,
      input.config,
      input.smallerIsBetter
    );
    const light = isLightTheme();
    // The lines are redrawn: a pointer still over one enters it again and shows it again.
    this._tooltip.hidden = true;
    this._width = this.node.clientWidth;
    const width = Math.max(420, this._width || 800);
    const plotWidth = width - MARGIN.left - MARGIN.right;
    const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
    const n = model.axes.length;
    const xOf = (i: number): number =>
      MARGIN.left + (n === 1 ? plotWidth / 2 : (i * plotWidth) / (n - 1));
    const yOf = (pos: number): number => MARGIN.top + (1 - pos) * plotHeight;
    const root = svg('svg', {
      width,
      height: HEIGHT,
      viewBox: `0 0 ${width} ${HEIGHT}`,
      class: 'jp-Det-parcoords-svg'
    });
    this.node.dataset.axes = model.axes.map(a => `${a.label}:${a.kind}`).join(',');
    this.node.dataset.lines = String(model.lines.length);

    const lines = svg('g', { class: 'jp-Det-parcoords-lines' });
    // Trials without a metric first, then worst to best: the best lies on top.
    const order = [...model.lines].sort((a, b) => {
      const sa = Number.isNaN(a.score) ? -1 : a.score;
      const sb = Number.isNaN(b.score) ? -1 : b.score;
      const emphasis = (l: IParcoordsLine): number =>
        l.trialId === model.bestTrialId ? 2 : input.selected.has(l.trialId) ? 1 : 0;
      return emphasis(a) - emphasis(b) || sa - sb || a.trialId - b.trialId;
    });
    const trialsById = new Map(input.trials.map(t => [t.id, t]));
    for (const line of order) {
      let d = '';
      let pen = false;
      line.positions.forEach((pos, i) => {
        if (pos === null) {
          pen = false;
          return;
        }
        d += `${pen ? 'L' : 'M'}${xOf(i).toFixed(1)},${yOf(pos).toFixed(1)}`;
        pen = true;
      });
      if (!d) {
        continue;
      }
      const best = line.trialId === model.bestTrialId;
      const selected = input.selected.has(line.trialId);
      const group = svg('g', {
        class: `jp-Det-parcoords-line${best ? ' jp-mod-best' : ''}${selected ? ' jp-mod-selected' : ''}${Number.isNaN(line.score) ? ' jp-mod-nometric' : ''}`,
        'data-trial-id': line.trialId
      });
      group.append(
        svg('path', {
          d,
          class: 'jp-Det-parcoords-stroke',
          stroke: rampColor(line.score, light),
          fill: 'none'
        }),
        svg('path', { d, class: 'jp-Det-parcoords-hit', stroke: 'transparent', fill: 'none' })
      );
      const trial = trialsById.get(line.trialId);
      group.addEventListener('mouseenter', event =>
        this._hover(root, group, line, trial, model, event)
      );
      group.addEventListener('mousemove', event => this._moveTooltip(event));
      group.addEventListener('mouseleave', () => this._unhover(root, group));

      group.addEventListener('click', () => this._onToggle(line.trialId));
      lines.appendChild(group);
    }

    const axes = svg('g', { class: 'jp-Det-parcoords-axes' });
    model.axes.forEach((axis, i) => {
      const x = xOf(i);
      const g = svg('g', {
        class: `jp-Det-parcoords-axis jp-Det-parcoords-axis-${axis.kind}`,
        'data-axis': axis.label
      });
      g.appendChild(
        svg('line', {
          x1: x,
          x2: x,
          y1: MARGIN.top,
          y2: MARGIN.top + plotHeight,
          class: 'jp-Det-parcoords-axisLine'
        })
      );
      const maxChars = Math.max(6, Math.floor(plotWidth / Math.max(1, n - 1) / 7));
      const title = svg('text', {
        x,
        y: MARGIN.top - 18,
        'text-anchor': i === 0 && n > 1 ? 'start' : 'middle',
        class: 'jp-Det-parcoords-title'
      });
      title.textContent = shorten(axis.label, maxChars) + (axis.kind === 'log' ? ' (log)' : '');
      const tooltip = svg('title');
      tooltip.textContent = `${axis.label}${axis.kind === 'log' ? ' (log scale)' : axis.kind === 'categorical' ? ' (categories)' : ''}`;
      title.appendChild(tooltip);
      g.appendChild(title);
      // The metric axis is the last: its labels go right, outside the lines.
      const right = axis.key === 'metric';
      for (const tick of axisTicks(axis)) {
        const y = yOf(tick.pos);
        g.appendChild(
          svg('line', {
            x1: right ? x + 3 : x - 3,
            x2: x,
            y1: y,
            y2: y,
            class: 'jp-Det-parcoords-tick'
          })
        );
        const label = svg('text', {
          x: right ? x + 5 : x - 5,
          y: y + 3.5,
          'text-anchor': right ? 'start' : 'end',
          class: 'jp-Det-parcoords-tickLabel'
        });
        label.textContent = shorten(tick.label, 12);
        g.appendChild(label);
      }
      axes.appendChild(g);
    });
    // The hovered line is copied here, above the others, so the stacking of the rest stays.
    const hoverLayer = svg('g', { class: 'jp-Det-parcoords-hoverLayer' });
    root.append(lines, hoverLayer, axes);
    this._svgHost.replaceChildren(root);

    const stops = [0, 0.25, 0.5, 0.75, 1].map(t => `${rampColor(t, light)} ${t * 100}%`).join(', ');
    const withMetric = model.lines.filter(l => !Number.isNaN(l.score)).length;
    this._legend.replaceChildren(
      h('span', null, `colour: best ${input.metric}`),
      h('span', {
        class: 'jp-Det-parcoords-ramp',
        style: { background: `linear-gradient(to right, ${stops})` }
      }),
      h('span', null, 'worse → better'),
      h(
        'span',
        { class: 'jp-Det-parcoords-count' },
        `${withMetric} of ${model.lines.length} trials with a validation${withMetric < model.lines.length ? ' (grey: none yet)' : ''} · click a line to select the trial`
      )
    );
  }

  private _hover(
    root: SVGElement,
    group: SVGElement,
    line: IParcoordsLine,
    trial: ITrial | undefined,
    model: IParcoordsModel,
    event: MouseEvent
  ): void {
    root.classList.add('jp-mod-hovering');
    group.classList.add('jp-mod-hover');
    const stroke = group.querySelector('.jp-Det-parcoords-stroke');
    const layer = root.querySelector('.jp-Det-parcoords-hoverLayer');
    if (stroke && layer) {
      const copy = stroke.cloneNode() as SVGPathElement;
      copy.setAttribute('class', 'jp-Det-parcoords-hoverStroke');
      layer.replaceChildren(copy);
    }
    const flat = flattenHparams(trial?.hparams);
    const parts = [`trial ${line.trialId}${line.trialId === model.bestTrialId ? ' ★ best' : ''}`];
    if (trial) {
      parts.push(trialDisplayState(trial));
    }
    parts.push(`${model.axes[model.axes.length - 1].label} ${formatMetric(line.metric)}`);
    for (const axis of model.axes.slice(0, -1)) {
      parts.push(`${axis.label} ${formatMetric(flat[axis.key.slice(3)])}`);
    }
    this._tooltip.textContent = parts.join(' · ');
    this._tooltip.hidden = false;
    this._moveTooltip(event);
  }

  private _moveTooltip(event: MouseEvent): void {
    const box = this.node.getBoundingClientRect();
    const x = event.clientX - box.left;
    const y = event.clientY - box.top;
    const flip = x > box.width * 0.6;
    this._tooltip.style.left = flip ? '' : `${x + 14}px`;
    this._tooltip.style.right = flip ? `${box.width - x + 14}px` : '';
    this._tooltip.style.top = `${Math.max(0, y - 34)}px`;
  }

  private _unhover(root: SVGElement, group: SVGElement): void {
    root.classList.remove('jp-mod-hovering');
    group.classList.remove('jp-mod-hover');
    root.querySelector('.jp-Det-parcoords-hoverLayer')?.replaceChildren();
    this._tooltip.hidden = true;
  }

  dispose(): void {
    this._resizeObserver.disconnect();
    this._disconnectTheme();
  }
}

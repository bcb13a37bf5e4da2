/**
 * Chart colours that follow the JupyterLab theme: text, axes and grid come from the theme's
 * CSS variables, series colours from a palette made for a light or a dark background, and
 * charts redraw when the user switches themes.
 */

/** Series colours on a light background (strong, mid-dark shades: legible on white). */
export const LIGHT_PALETTE = [
  '#2563eb',
  '#ea580c',
  '#16a34a',
  '#dc2626',
  '#9333ea',
  '#0891b2',
  '#db2777',
  '#65a30d',
  '#b45309',
  '#475569'
];

/** The same hues, lighter: legible on the dark theme's near-black. */
export const DARK_PALETTE = [
  '#60a5fa',
  '#fb923c',
  '#4ade80',
  '#f87171',
  '#c084fc',
  '#22d3ee',
  '#f472b6',
  '#a3e635',
  '#fbbf24',
  '#cbd5e1'
];

export function paletteFor(light: boolean): string[] {
  return light ? LIGHT_PALETTE : DARK_PALETTE;
}

/** A trial's colour: fixed by its id, so it is the same in every chart and table. */
export function trialColor(trialId: number, light: boolean): string {
  const palette = paletteFor(light);
  return palette[(((trialId - 1) % palette.length) + palette.length) % palette.length];
}

// matplotlib's "plasma", sampled every 0.1: perceptually even, and readable when cut at the
// end that vanishes into the background (the dark end on black, the yellow end on white).
const PLASMA = [
  '#0d0887',
  '#41049d',
  '#6a00a8',
  '#8f0da4',
  '#b12a90',
  '#cc4778',
  '#e16462',
  '#f2844b',
  '#fca636',
  '#fcce25',
  '#f0f921'
];

function hexToRgb(hex: string): [number, number, number] {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

/**
 * The colour of a value on a 0 (worst) .. 1 (best) scale: plasma from 0 to 0.82 on a light
 * background, from 0.22 to 1 on a dark one. NaN (no value) is grey.
 */
export function rampColor(t: number, light: boolean): string {
  if (!Number.isFinite(t)) {
    return light ? '#9e9e9e' : '#757575';
  }
  const clamped = Math.min(1, Math.max(0, t));
  const [from, to] = light ? [0, 0.82] : [0.22, 1];
  const position = (from + clamped * (to - from)) * (PLASMA.length - 1);
  const i = Math.min(PLASMA.length - 2, Math.floor(position));
  const f = position - i;
  const a = hexToRgb(PLASMA[i]);
  const b = hexToRgb(PLASMA[i + 1]);
  const mix = a.map((c, k) => Math.round(c + (b[k] - c) * f));
  return `rgb(${mix[0]}, ${mix[1]}, ${mix[2]})`;
}

export interface IChartTheme {
  light: boolean;
  /** Titles and legend text. */
  text: string;
  /** Tick labels. */
  textMuted: string;
  /** Axis lines and ticks. */
  axis: string;
  /** Grid lines. */
  grid: string;
  background: string;
  fontFamily: string;
  palette: string[];
}

/** Whether JupyterLab shows a light theme now (JupyterLab marks it on <body>). */
export function isLightTheme(): boolean {
  return typeof document === 'undefined' || document.body?.dataset.jpThemeLight !== 'false';
}

/** The chart colours of the current theme, read from JupyterLab's CSS variables. */
export function readChartTheme(): IChartTheme {
  const light = isLightTheme();
  const style =
    typeof document !== 'undefined' && document.body ? getComputedStyle(document.body) : null;
  const read = (name: string, fallback: string): string =>
    style?.getPropertyValue(name).trim() || fallback;
  return {
    light,
    text: read('--jp-ui-font-color1', light ? 'rgba(0, 0, 0, 0.87)' : 'rgba(255, 255, 255, 1)'),
    textMuted: read(
      '--jp-ui-font-color2',
      light ? 'rgba(0, 0, 0, 0.54)' : 'rgba(255, 255, 255, 0.72)'
    ),
    axis: read('--jp-border-color1', light ? '#bdbdbd' : '#616161'),
    grid: read('--jp-border-color2', light ? '#e0e0e0' : '#424242'),
    background: read('--jp-layout-color0', light ? 'white' : '#111111'),
    fontFamily: read('--jp-ui-font-family', 'system-ui, sans-serif'),
    palette: paletteFor(light)
  };
}

const listeners = new Set<() => void>();
let observer: MutationObserver | null = null;
let lastKey = '';

function themeKey(): string {
  const theme = readChartTheme();
  return [theme.light, theme.text, theme.grid, theme.background].join('|');
}

function checkTheme(): void {
  const key = themeKey();
  if (key === lastKey) {
    return;
  }
  lastKey = key;
  for (const listener of [...listeners]) {
    try {
      listener();
    } catch (error) {
      console.error('jupyter-determined: a theme listener failed', error);
    }
  }
}

/**
 * Call `listener` after each theme switch (once the new theme's variables apply); returns the
 * disconnect. One MutationObserver on <body> serves every chart.
 */
export function onThemeChange(listener: () => void): () => void {
  listeners.add(listener);
  if (!observer && typeof MutationObserver !== 'undefined' && typeof document !== 'undefined') {
    lastKey = themeKey();
    observer = new MutationObserver(() => {
      // The theme's stylesheet may land a moment after the attribute: look again shortly.
      requestAnimationFrame(checkTheme);
      window.setTimeout(checkTheme, 400);
    });
    observer.observe(document.body, {
      attributes: true,
      attributeFilter: ['data-jp-theme-light', 'data-jp-theme-name']
    });
  }
  return () => {
    listeners.delete(listener);
    if (!listeners.size && observer) {
      observer.disconnect();
      observer = null;
    }
  };
}

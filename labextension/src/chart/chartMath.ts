/**
 * The decisions behind the charts, as plain functions: axis ranges, tick positions and labels,
 * when to draw markers, and which point a hover names. No DOM and no uPlot, so the unit tests
 * run them under node.
 */

export interface IRangeOptions {
  /** A log scale: pad by a factor, never reach 0. */
  log?: boolean;
  /** The fraction of the span added on each side (linear scales). */
  pad?: number;
}

/**
 * The shown range of a scale holding values from `min` to `max`: the data with a little room,
 * never below 0 when no value is (a loss or an error rate must not get a negative axis), and a
 * sensible window around a single value.
 */
export function paddedRange(
  min: number | null,
  max: number | null,
  options: IRangeOptions = {}
): [number, number] {
  const pad = options.pad ?? 0.06;
  if (min === null || max === null || !Number.isFinite(min) || !Number.isFinite(max)) {
    return options.log ? [1, 10] : [0, 1];
  }
  if (min > max) {
    [min, max] = [max, min];
  }
  if (options.log) {
    if (min <= 0) {
      min = max > 0 ? max / 1000 : 1;
      max = max > 0 ? max : 10;
    }
    const ratio = max / min;
    const factor = ratio > 1 ? Math.pow(ratio, Math.max(pad, 0.04)) : 2;
    return [min / factor, max * factor];
  }
  let lo: number;
  let hi: number;
  if (max === 0 && min === 0) {
    return [0, 1];
  }
  if (max === min) {
    const half = Math.abs(max) * 0.1 || 1;
    lo = min - half;
    hi = max + half;
  } else {
    const room = (max - min) * pad;
    lo = min - room;
    hi = max + room;
  }
  if (min >= 0 && lo < 0) {
    lo = 0;
  }
  if (max <= 0 && hi > 0) {
    hi = 0;
  }
  return [lo, hi];
}

/**
 * The x range of a line chart over steps: the data with 2 % room on each side (so a marker on
 * the first or last step is not cut in half), never below 0; a window around a single step.
 */
export function stepRange(min: number | null, max: number | null): [number, number] {
  if (min === null || max === null || !Number.isFinite(min) || !Number.isFinite(max)) {
    return [0, 1];
  }
  if (min === max) {
    return [Math.max(0, min - 1), max + 1];
  }
  const room = (max - min) * 0.02;
  return [min >= 0 ? Math.max(0, min - room) : min - room, max + room];
}

/**
 * Tick increments for an axis of whole numbers (steps, an int hyperparameter): 1-2-5 steps
 * from 1 up, so it never shows step 2.5.
 */
export const INTEGER_INCRS: number[] = (() => {
  const incrs: number[] = [];
  for (let k = 0; k <= 15; k++) {
    for (const m of [1, 2, 5]) {
      incrs.push(Number(`${m}e${k}`));
    }
  }
  return incrs;
})();

/** `10 ** k` without the float noise of Math.pow (`1e-4`, not `0.00009999999999999999`). */
function pow10(k: number, mantissa = 1): number {
  return Number(`${mantissa}e${k}`);
}

/**
 * Tick values of a log axis from `min` to `max`: powers of ten; 1-2-5 steps when the range
 * holds fewer than two powers; every integer mantissa when it holds fewer than two of those;
 * and when there are too many powers, every n-th.
 */
export function logTicks(min: number, max: number, maxTicks = 8): number[] {
  if (!(min > 0) || !(max > 0) || !Number.isFinite(min) || !Number.isFinite(max)) {
    return [];
  }
  if (min > max) {
    [min, max] = [max, min];
  }
  const lowDecade = Math.floor(Math.log10(min)) - 1;
  const highDecade = Math.ceil(Math.log10(max)) + 1;
  const within = (mantissas: number[]): number[] => {
    const ticks: number[] = [];
    for (let k = lowDecade; k <= highDecade; k++) {
      for (const m of mantissas) {
        const value = pow10(k, m);
        // A hair of tolerance: a range padded to exactly 1e-4 must keep its tick.
        if (value >= min * (1 - 1e-9) && value <= max * (1 + 1e-9)) {
          ticks.push(value);
        }
      }
    }
    return ticks;
  };
  let ticks = within([1]);
  if (ticks.length > maxTicks) {
    const every = Math.ceil(ticks.length / maxTicks);
    return ticks.filter(value => Math.round(Math.log10(value)) % every === 0);
  }
  if (ticks.length >= 2) {
    return ticks;
  }
  // Less than two powers of ten in range means less than two decades: 1-2-5 fit.
  ticks = within([1, 2, 5]);
  if (ticks.length >= 2) {
    return ticks;
  }
  ticks = within([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  if (ticks.length >= 2) {
    return ticks;
  }
  return [min, max];
}

/** The shortest of `render(digits)` for digits 0..12 that reads back within `tolerance`. */
function shortest(value: number, tolerance: number, render: (digits: number) => string): string {
  for (let digits = 0; digits <= 12; digits++) {
    const text = render(digits);
    if (Math.abs(Number(text) - value) <= tolerance) {
      return text;
    }
  }
  return render(12);
}

/**
 * Labels for the ticks of one axis: as short as possible while neighbours stay distinct, in
 * exponent form when the axis holds tiny (< 0.001) or huge (>= 1e6) values — `1e-4`, never
 * the `0` a fixed number of decimals gives.
 */
export function formatTicks(values: readonly (number | null)[]): string[] {
  // uPlot passes null for a tick its axis filter dropped: that tick has no label.
  const finite = values.filter((v): v is number => v !== null && Number.isFinite(v));
  if (!finite.length) {
    return values.map(v => (v === null ? '' : String(v)));
  }
  const sorted = [...new Set(finite)].sort((a, b) => a - b);
  let step = Infinity;
  for (let i = 1; i < sorted.length; i++) {
    step = Math.min(step, sorted[i] - sorted[i - 1]);
  }
  // A tick a rounding error away from 0 (0.1 + 0.2 - 0.3) is 0, not a tiny value.
  const noise = Number.isFinite(step) ? step * 1e-6 : 0;
  let maxAbs = 0;
  let minNonZero = Infinity;
  for (const v of finite) {
    const abs = Math.abs(v);
    maxAbs = Math.max(maxAbs, abs);
    if (abs > noise) {
      minNonZero = Math.min(minNonZero, abs);
    }
  }
  const exponent = maxAbs >= 1e6 || minNonZero < 1e-3;
  return values.map(value => {
    if (value === null) {
      return '';
    }
    if (!Number.isFinite(value)) {
      return String(value);
    }
    const local = Number.isFinite(step) ? step : Math.abs(value) || 1;
    if (Math.abs(value) <= noise || value === 0) {
      return '0';
    }
    // Neighbours must stay apart, and each label close to its own value (log ticks are far
    // apart in absolute terms, so the relative tolerance decides there).
    const tolerance = Math.min(local / 1000, Math.abs(value) * 1e-3);
    if (exponent) {
      const text = shortest(value, tolerance, digits => value.toExponential(digits));
      return text.replace('e+', 'e');
    }
    return shortest(value, tolerance, digits => value.toFixed(digits));
  });
}

/**
 * Whether to draw a series' points as markers: always when it has a single point (a line
 * needs two; a trial stopped by ASHA after its first rung has one validation), and when its
 * points are far enough apart to be seen as points.
 */
export function showMarkers(pointCount: number, plotWidthPx: number, minSpacingPx = 30): boolean {
  if (pointCount <= 0) {
    return false;
  }
  if (pointCount === 1) {
    return true;
  }
  return plotWidthPx / pointCount >= minSpacingPx;
}

/** How many values of `ys` between `from` and `to` (inclusive) are present. */
export function countPresent(
  ys: ArrayLike<number | null | undefined>,
  from = 0,
  to = ys.length - 1
): number {
  let count = 0;
  for (let i = Math.max(0, from); i <= Math.min(to, ys.length - 1); i++) {
    const value = ys[i];
    if (value !== null && value !== undefined) {
      count += 1;
    }
  }
  return count;
}

/**
 * The index of the value of `ys` nearest to the cursor at `idx` (x `xValue`): the cursor's own
 * index when it has a value, else the closer (in x) of the nearest present values on each side.
 * On a step axis shared by trials that report at different steps, a trial's value is shown
 * wherever the cursor is, not only on its own steps.
 */
export function nearestPresent(
  ys: ArrayLike<number | null | undefined>,
  xs: ArrayLike<number>,
  idx: number,
  xValue: number = xs[idx]
): number | null {
  if (idx < 0 || idx >= ys.length) {
    return null;
  }
  if (ys[idx] !== null && ys[idx] !== undefined) {
    return idx;
  }
  let left = idx - 1;
  while (left >= 0 && (ys[left] === null || ys[left] === undefined)) {
    left -= 1;
  }
  let right = idx + 1;
  while (right < ys.length && (ys[right] === null || ys[right] === undefined)) {
    right += 1;
  }
  const hasLeft = left >= 0;
  const hasRight = right < ys.length;
  if (!hasLeft && !hasRight) {
    return null;
  }
  if (!hasLeft) {
    return right;
  }
  if (!hasRight) {
    return left;
  }
  return Math.abs(xs[right] - xValue) < Math.abs(xValue - xs[left]) ? right : left;
}

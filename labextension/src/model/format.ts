/**
 * Formatting of numbers, percentages, times, durations and sizes for the sidebar and the
 * experiment view. Pure (no DOM), tested under plain node.
 */

/** `0.4567` -> `"46%"`; anything not a finite number -> `"—"`. */
export function formatPercent(fraction: number | null | undefined): string {
  if (typeof fraction !== 'number' || !Number.isFinite(fraction)) {
    return '—';
  }
  const clamped = Math.min(1, Math.max(0, fraction));
  return `${Math.round(clamped * 100)}%`;
}

/** `"1.500e-4"` -> `"1.5e-4"`, `"2.000e+6"` -> `"2e6"`. */
function tidyExponent(text: string): string {
  const [mantissa, exponent] = text.split('e');
  const tidy = mantissa.includes('.') ? mantissa.replace(/0+$/, '').replace(/\.$/, '') : mantissa;
  return exponent === undefined ? tidy : `${tidy}e${exponent.replace(/^\+/, '')}`;
}

/**
 * A number for people: at most `digits` significant digits, exponent form for tiny
 * (< 0.001) and huge (>= 1e6) magnitudes, no trailing zeros: `0.30000000000000004` -> `0.3`,
 * `0.000123456` -> `1.235e-4`, `1234567.8` -> `1.235e6`. Integers below 1e9 stay exact
 * (steps, ids, batch sizes).
 */
export function formatNumber(value: number, digits = 4): string {
  if (!Number.isFinite(value)) {
    return String(value);
  }
  if (Number.isInteger(value) && Math.abs(value) < 1e9) {
    return String(value);
  }
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) {
    return tidyExponent(value.toExponential(digits - 1));
  }
  const rounded = Number(value.toPrecision(digits));
  // toPrecision may round up into the next magnitude (999999.9 -> 1e6): keep the rule.
  if (Math.abs(rounded) >= 1e6) {
    return tidyExponent(rounded.toExponential(digits - 1));
  }
  return String(rounded);
}

/** A metric value in at most 4 significant digits; integers stay integers. */
export function formatMetric(value: unknown): string {
  if (value === null || value === undefined) {
    return '—';
  }
  if (typeof value === 'number') {
    return formatNumber(value);
  }
  if (typeof value === 'string' || typeof value === 'boolean') {
    return String(value);
  }
  return JSON.stringify(value);
}

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/**
 * A start time for a list: `HH:MM:SS` when it is today (in local time), else `YYYY-MM-DD HH:MM`.
 * An unparsable time is shown as it came, so a server bug stays visible instead of blank.
 */
export function formatStartTime(iso: string | null | undefined, now: Date = new Date()): string {
  if (!iso) {
    return '—';
  }
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) {
    return String(iso);
  }
  const time = `${pad2(when.getHours())}:${pad2(when.getMinutes())}`;
  const sameDay =
    when.getFullYear() === now.getFullYear() &&
    when.getMonth() === now.getMonth() &&
    when.getDate() === now.getDate();
  if (sameDay) {
    return `${time}:${pad2(when.getSeconds())}`;
  }
  return `${when.getFullYear()}-${pad2(when.getMonth() + 1)}-${pad2(when.getDate())} ${time}`;
}

/** Seconds -> `"1h 02m"`, `"3m 05s"`, `"42s"`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) {
    return '—';
  }
  const s = Math.floor(seconds);
  if (s < 60) {
    return `${s}s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)}m ${pad2(s % 60)}s`;
  }
  return `${Math.floor(s / 3600)}h ${pad2(Math.floor((s % 3600) / 60))}m`;
}

/** Bytes in binary units: `1536` -> `"1.5 KiB"`. */
export function formatBytes(bytes: number | null | undefined): string {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes) || bytes < 0) {
    return '—';
  }
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

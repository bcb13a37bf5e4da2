/**
 * Non-finite numbers in the master's answers. The master answers strict JSON: a NaN or
 * infinite number (a diverged `loss`) comes as the string "NaN", "Infinity" or "-Infinity",
 * as Determined's API sends it (docs/rest-api.md, "Non-finite numbers"). The sidebar reads them
 * back as JavaScript's NaN and ±Infinity where a number belongs: metric values (anything under
 * `metrics`, `batch_metrics` or `avg_metrics`) and the number fields `NUMBER_KEYS`. Other
 * strings (an experiment named "NaN") stay strings. Charts then draw those points as gaps with
 * a marker, and tables show "NaN" (model/format.ts, model/series.ts).
 */

const NON_FINITE: Record<string, number> = {
  NaN: NaN,
  Infinity: Infinity,
  '-Infinity': -Infinity
};
const NUMBER_KEYS = new Set(['best_validation', 'searcher_metric', 'progress', 'weight']);
const METRIC_KEYS = new Set(['metrics', 'batch_metrics', 'avg_metrics']);

/** Whether JSON text may hold an encoded non-finite number (most answers do not). */
export function mayHoldNonFinite(text: string): boolean {
  return text.includes('"NaN"') || text.includes('Infinity"');
}

function metricValues(value: unknown): unknown {
  if (typeof value === 'string') {
    return Object.prototype.hasOwnProperty.call(NON_FINITE, value) ? NON_FINITE[value] : value;
  }
  if (Array.isArray(value)) {
    return value.map(metricValues);
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      out[key] = metricValues(item);
    }
    return out;
  }
  return value;
}

/** A decoded answer with its encoded non-finite numbers as numbers (see the module doc). */
export function decodeNonFinite(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(decodeNonFinite);
  }
  if (value === null || typeof value !== 'object') {
    return value;
  }
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (METRIC_KEYS.has(key)) {
      out[key] = metricValues(item);
    } else if (NUMBER_KEYS.has(key) && typeof item === 'string') {
      out[key] = Object.prototype.hasOwnProperty.call(NON_FINITE, item) ? NON_FINITE[item] : item;
    } else {
      out[key] = decodeNonFinite(item);
    }
  }
  return out;
}

/** `JSON.parse` of an answer of the master, non-finite numbers decoded. */
export function parseApiJson(text: string): unknown {
  const value: unknown = JSON.parse(text);
  return mayHoldNonFinite(text) ? decodeNonFinite(value) : value;
}

/**
 * The reverse, for what the sidebar writes (the final snapshot saved in a notebook's output):
 * NaN and ±Infinity as the strings the master answers, since JSON.stringify would write null.
 */
export function encodeNonFinite(value: unknown): unknown {
  if (typeof value === 'number') {
    if (Number.isFinite(value)) {
      return value;
    }
    return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
  }
  if (Array.isArray(value)) {
    return value.map(encodeNonFinite);
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      out[key] = encodeNonFinite(item);
    }
    return out;
  }
  return value;
}

/**
 * What the learning curves' controls do to the data: the x axis (steps, epochs, wall time),
 * smoothing, the CSV export, and the profiler's system metrics as plain series.
 */
import type { IMetricReport } from '../api/types';

/** The learning curves' x axis: batches (steps_completed), epochs, or seconds since start. */
export type XAxis = 'steps' | 'epochs' | 'time';

export const X_AXIS_LABELS: Record<XAxis, string> = {
  steps: 'batches',
  epochs: 'epochs',
  time: 'wall time (s)'
};

/** The epoch a report carries (`epochs`, as the PyTorch Trainer reports, or `epoch`), or null. */
export function reportEpoch(report: IMetricReport): number | null {
  const metrics = report.metrics ?? {};
  const value = metrics.epochs ?? metrics.epoch;
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** The x axes these reports can be drawn on: epochs only when some report carries one. */
export function availableXAxes(reports: Iterable<IMetricReport>): XAxis[] {
  const axes: XAxis[] = ['steps'];
  let epochs = false;
  let time = false;
  for (const report of reports) {
    epochs ||= reportEpoch(report) !== null;
    time ||= !!report.report_time;
    if (epochs && time) {
      break;
    }
  }
  return [
    ...axes,
    ...(epochs ? (['epochs'] as XAxis[]) : []),
    ...(time ? (['time'] as XAxis[]) : [])
  ];
}

/**
 * Where each report goes on `axis`, per trial: `time` counts seconds from the trial's first
 * report in `reportsByTrial` (so trials started at different times line up at 0). null: the
 * report has no such x (no epoch, no time) and is left out.
 */
export function xPlacer(
  reportsByTrial: Map<number, IMetricReport[]>,
  axis: XAxis
): (report: IMetricReport) => number | null {
  if (axis === 'steps') {
    return report => report.steps_completed;
  }
  if (axis === 'epochs') {
    return reportEpoch;
  }
  const origin = new Map<number, number>();
  for (const [trialId, reports] of reportsByTrial) {
    let first = Infinity;
    for (const report of reports) {
      const t = Date.parse(report.report_time);
      if (Number.isFinite(t)) {
        first = Math.min(first, t);
      }
    }
    origin.set(trialId, first);
  }
  return report => {
    const t = Date.parse(report.report_time);
    const from = origin.get(report.trial_id);
    return Number.isFinite(t) && from !== undefined && Number.isFinite(from)
      ? Math.round(t - from) / 1000
      : null;
  };
}

/**
 * An exponential moving average as TensorBoard smooths (`weight` 0: the data as it is; 0.99:
 * very smooth), debiased so the first points are not pulled toward 0. A missing point
 * (undefined) stays missing; a non-finite one (null, a gap) stays a gap and is not averaged in.
 */
export function smoothSeries(
  values: (number | null | undefined)[],
  weight: number
): (number | null | undefined)[] {
  if (!(weight > 0)) {
    return values;
  }
  const w = Math.min(weight, 0.999);
  let last = 0;
  let count = 0;
  return values.map(value => {
    if (value === null || value === undefined) {
      return value;
    }
    last = last * w + (1 - w) * value;
    count += 1;
    return last / (1 - Math.pow(w, count));
  });
}

/** Whether every drawn value is positive, so a log y axis can place them all. */
export function allPositive(ys: (number | null | undefined)[][]): boolean {
  let any = false;
  for (const series of ys) {
    for (const value of series) {
      if (value === null || value === undefined) {
        continue;
      }
      if (!(value > 0)) {
        return false;
      }
      any = true;
    }
  }
  return any;
}

function csvField(text: string): string {
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * The series as shown, as CSV: one column for x, one per series; an empty field where a series
 * has no point, `NaN`/`Infinity`/`-Infinity` where it reported one (`nonFinite`: series, x
 * index, value).
 */
export function seriesCsv(
  xLabel: string,
  x: number[],
  labels: string[],
  ys: (number | null | undefined)[][],
  nonFinite: { series: number; index: number; value: number }[] = []
): string {
  const special = new Map(nonFinite.map(p => [`${p.series}:${p.index}`, p.value]));
  const lines = [[xLabel, ...labels].map(csvField).join(',')];
  x.forEach((xValue, index) => {
    const fields = [String(xValue)];
    ys.forEach((series, s) => {
      const value = series[index];
      if (value === undefined) {
        fields.push('');
      } else if (value === null) {
        fields.push(String(special.get(`${s}:${index}`) ?? 'NaN'));
      } else {
        fields.push(String(value));
      }
    });
    lines.push(fields.join(','));
  });
  return lines.join('\n') + '\n';
}

/** The report groups the profiler writes (`core_context.profiler`, harness/determined/core). */
export const SYSTEM_GROUPS = ['cpu', 'gpu', 'memory', 'disk', 'network'];

/**
 * A profiler report's values as flat names: the profiler nests them under the agent id (and a
 * GPU uuid or disk path), e.g. `{agent: {GPU-1: {gpu_util: 50}}}` -> `GPU-1 › gpu_util`. The agent
 * id is kept only when the report has several (a multi-machine trial).
 */
export function flattenSystemMetrics(metrics: Record<string, unknown>): Record<string, number> {
  const out: Record<string, number> = {};
  const agents = Object.keys(metrics);
  const walk = (value: unknown, path: string[]) => {
    if (typeof value === 'number') {
      out[path.join(' › ')] = value;
    } else if (value && typeof value === 'object' && !Array.isArray(value)) {
      for (const [key, inner] of Object.entries(value as Record<string, unknown>)) {
        walk(inner, [...path, key]);
      }
    }
  };
  for (const agent of agents) {
    walk(metrics[agent], agents.length > 1 ? [agent] : []);
  }
  return out;
}

/** Profiler reports with their values flattened (what the system charts align and draw). */
export function flattenSystemReports(
  reportsByTrial: Map<number, IMetricReport[]>
): Map<number, IMetricReport[]> {
  const out = new Map<number, IMetricReport[]>();
  for (const [trialId, reports] of reportsByTrial) {
    out.set(
      trialId,
      reports.map(report => ({ ...report, metrics: flattenSystemMetrics(report.metrics ?? {}) }))
    );
  }
  return out;
}

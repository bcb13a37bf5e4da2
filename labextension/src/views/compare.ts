/**
 * Trials side by side: state, steps, metrics and hyperparameters in one table, a column per
 * trial, rows that differ marked and the best metric of each row marked. The rows are plain
 * data (unit-tested under node); `comparisonTable` draws them.
 */
import { h } from '../dom';
import { formatDuration, formatMetric } from '../model/format';
import { trialDisplayState, trialExitNote } from '../model/states';
import {
  bestSearcherMetric,
  flattenHparams,
  hparamColumns,
  latestSearcherMetric
} from '../model/trialTable';
import { trialColor } from '../chart/theme';
import type { ITrial } from '../api/types';

export type CompareSection = 'trial' | 'metric' | 'hparam';

export interface ICompareRow {
  section: CompareSection;
  label: string;
  cells: string[];
  /** The column holding the best value of a metric row; -1 when none or not a metric. */
  bestIndex: number;
  /** Whether the trials disagree on this row. */
  differs: boolean;
}

function bestIndexOf(values: (number | null)[], smallerIsBetter: boolean): number {
  let best = -1;
  values.forEach((value, i) => {
    if (value === null || !Number.isFinite(value)) {
      return;
    }
    if (
      best < 0 ||
      (smallerIsBetter ? value < (values[best] as number) : value > (values[best] as number))
    ) {
      best = i;
    }
  });
  // One value among the columns is not "best" of anything.
  return values.filter(v => v !== null).length > 1 ? best : -1;
}

function row(section: CompareSection, label: string, cells: string[], bestIndex = -1): ICompareRow {
  return { section, label, cells, bestIndex, differs: new Set(cells).size > 1 };
}

function numberOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function durationOf(trial: ITrial): string {
  const start = Date.parse(trial.start_time);
  const end = trial.end_time ? Date.parse(trial.end_time) : Number.NaN;
  return Number.isFinite(start) && Number.isFinite(end)
    ? formatDuration((end - start) / 1000)
    : '—';
}

/**
 * The comparison of these trials (in this column order): what they are, how far they got,
 * their metrics (best first: the searcher metric's best and latest, then every other latest
 * validation and training metric) and their hyperparameters.
 */
export function comparisonRows(
  trials: ITrial[],
  metric: string,
  smallerIsBetter = true
): ICompareRow[] {
  const rows: ICompareRow[] = [];
  rows.push(row('trial', 'state', trials.map(trialDisplayState)));
  rows.push(
    row(
      'trial',
      'steps',
      trials.map(t => String(t.steps_completed))
    )
  );
  rows.push(
    row(
      'trial',
      'restarts',
      trials.map(t => String(t.restarts))
    )
  );
  rows.push(row('trial', 'duration', trials.map(durationOf)));
  const notes = trials.map(trialExitNote);
  if (notes.some(Boolean)) {
    rows.push(
      row(
        'trial',
        'ended',
        notes.map(n => n || '—')
      )
    );
  }

  const best = trials.map(t => bestSearcherMetric(t, metric));
  rows.push(
    row('metric', `best ${metric}`, best.map(formatMetric), bestIndexOf(best, smallerIsBetter))
  );
  const latest = trials.map(t => latestSearcherMetric(t, metric));
  rows.push(
    row(
      'metric',
      `latest ${metric}`,
      latest.map(formatMetric),
      bestIndexOf(latest, smallerIsBetter)
    )
  );
  for (const group of ['validation', 'training'] as const) {
    const names = new Set<string>();
    for (const trial of trials) {
      const snapshot = group === 'validation' ? trial.latest_validation : trial.latest_training;
      for (const [name, value] of Object.entries(snapshot?.metrics ?? {})) {
        if (typeof value === 'number' && !(group === 'validation' && name === metric)) {
          names.add(name);
        }
      }
    }
    for (const name of [...names].sort()) {
      const values = trials.map(t =>
        numberOrNull(
          (group === 'validation' ? t.latest_validation : t.latest_training)?.metrics?.[name]
        )
      );
      // Only the searcher metric says which way is better; other rows are not ranked.
      const ranked = name === metric ? bestIndexOf(values, smallerIsBetter) : -1;
      rows.push(row('metric', `latest ${group} ${name}`, values.map(formatMetric), ranked));
    }
  }

  const flat = trials.map(t => flattenHparams(t.hparams));
  for (const name of hparamColumns(trials)) {
    rows.push(
      row(
        'hparam',
        name,
        flat.map(f => formatMetric(f[name]))
      )
    );
  }
  return rows;
}

const SECTION_TITLES: Record<CompareSection, string> = {
  trial: 'Trial',
  metric: 'Metrics',
  hparam: 'Hyperparameters'
};

/** The comparison as a table: a column per trial, its colour as in the charts. */
export function comparisonTable(
  trials: ITrial[],
  rows: ICompareRow[],
  options: { bestTrialId: number | null; light: boolean; onlyDifferences: boolean }
): HTMLElement {
  const head = h(
    'tr',
    null,
    h('th', null, ''),
    ...trials.map(trial =>
      h(
        'th',
        { attrs: { 'data-trial-id': String(trial.id) } },
        h('span', {
          class: 'jp-Det-swatch',
          style: { background: trialColor(trial.id, options.light) }
        }),
        `trial ${trial.id}`,
        trial.id === options.bestTrialId
          ? h('span', { class: 'jp-Det-bestMark', title: 'best trial' }, ' ★')
          : null
      )
    )
  );
  const body = h('tbody');
  let section: CompareSection | null = null;
  for (const item of rows) {
    if (options.onlyDifferences && item.section === 'hparam' && !item.differs) {
      continue;
    }
    if (item.section !== section) {
      section = item.section;
      body.appendChild(
        h(
          'tr',
          { class: 'jp-Det-compareSection' },
          h('th', { attrs: { colspan: String(trials.length + 1) } }, SECTION_TITLES[section])
        )
      );
    }
    body.appendChild(
      h(
        'tr',
        {
          class: item.differs ? 'jp-mod-differs' : '',
          attrs: { 'data-row': item.label, 'data-section': item.section }
        },
        h('th', { class: 'jp-Det-compareLabel' }, item.label),
        ...item.cells.map((cell, i) =>
          h('td', { class: i === item.bestIndex ? 'jp-mod-bestValue' : '', title: cell }, cell)
        )
      )
    );
  }
  return h('table', { class: 'jp-Det-table jp-Det-compareTable' }, h('thead', null, head), body);
}

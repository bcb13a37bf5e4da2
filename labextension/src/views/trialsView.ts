/**
 * The Trials section's table: a row per trial with its state (QUEUED while it waits for a
 * slot; why it ended when it failed or was killed), progress, hyperparameters and searcher
 * metric; sortable columns; the best trial starred; a toolbar to select trials for the curves
 * and the comparison.
 */
import { progressText, stateBadge, stateProgressBar } from './badges';
import { h } from '../dom';
import { formatMetric } from '../model/format';
import {
  kernelConsoleAction,
  stopReasonText,
  trialDisplayState,
  trialExitNote,
  trialWaitNote
} from '../model/states';
import {
  bestSearcherMetric,
  bestTrialId,
  flattenHparams,
  hparamColumns,
  latestSearcherMetric,
  sortTrials
} from '../model/trialTable';
import { isLightTheme, trialColor } from '../chart/theme';
import type { ITrial } from '../api/types';

export interface ITrialsTableInput {
  trials: ITrial[];
  metric: string;
  smallerIsBetter: boolean;
  sortKey: string;
  sortAscending: boolean;
  /** The selected trials (plotted and compared). */
  selected: Set<number>;
  /** How many trials "All" selects at most. */
  maxSelected: number;
  onSort: (key: string) => void;
  onToggle: (trialId: number, on: boolean) => void;
  onSelect: (trialIds: number[]) => void;
  onCompare: () => void;
  /** Open a console on the trial's kernel; given only for experiments of kernel trials. */
  onAttach?: (trialId: number) => void;
  /** Re-run the trial with its hyperparameters or continue it (a dialog); none: no button. */
  onRunAgain?: (trialId: number) => void;
}

/** "↻": re-run the trial with its hyperparameters, or continue it from its checkpoint. */
function runAgainButton(trial: ITrial, onRunAgain?: (trialId: number) => void): HTMLElement | null {
  if (!onRunAgain) {
    return null;
  }
  const label = `Re-run or continue trial ${trial.id}…`;
  return h(
    'button',
    {
      class: 'jp-Det-iconButton jp-Det-runAgain',
      title: `${label} (a new experiment with its hyperparameters)`,
      attrs: { 'data-run-again': String(trial.id), 'aria-label': label },
      on: {
        click: event => {
          event.stopPropagation();
          onRunAgain(trial.id);
        }
      }
    },
    '↻'
  );
}

/** Kernel trials with a kernel to attach to: running, or failed and kept (post-mortem). */
function attachButton(trial: ITrial, onAttach?: (trialId: number) => void): HTMLElement | null {
  const action = kernelConsoleAction(trial);
  if (!onAttach || action === null) {
    return null;
  }
  const title =
    action === 'debug'
      ? "Open a console on the failed trial's kernel (kept for post-mortem): %debug shows the traceback"
      : "Open a console on the trial's kernel: the script's live globals (not read-only)";
  return h(
    'button',
    {
      class: 'jp-Det-button jp-Det-attachButton',
      attrs: { 'data-attach-trial': String(trial.id), title },
      on: { click: () => onAttach(trial.id) }
    },
    action === 'debug' ? 'Debug in console' : 'Attach'
  );
}

/** The toolbar and the (horizontally scrolling) table; a note while there are no trials. */
export function trialsTable(input: ITrialsTableInput): HTMLElement[] {
  const { trials, metric, selected } = input;
  if (!trials.length) {
    return [
      h(
        'div',
        { class: 'jp-Det-empty' },
        'No trials yet: the searcher creates them once the experiment is scheduled.'
      )
    ];
  }
  const best = bestTrialId(trials, metric, input.smallerIsBetter);
  const light = isLightTheme();
  const hparams = hparamColumns(trials);
  const columns: [string, string][] = [
    ['id', 'Trial'],
    ['state', 'State'],
    ['steps', 'Steps'],
    ['restarts', 'Restarts'],
    ...hparams.map(name => [`hp:${name}`, name] as [string, string]),
    ['latest', `latest ${metric}`],
    ['best', `best ${metric}`]
  ];
  const headRow = h(
    'tr',
    null,
    h('th', { title: 'Select: plot in the learning curves, and compare' }, 'Plot')
  );
  for (const [key, label] of columns) {
    const sorted = input.sortKey === key;
    headRow.appendChild(
      h(
        'th',
        {
          class: `jp-Det-sortable${sorted ? ' jp-mod-sorted' : ''}`,
          attrs: {
            'data-sort-key': key,
            'aria-sort': sorted ? (input.sortAscending ? 'ascending' : 'descending') : 'none'
          },
          on: { click: () => input.onSort(key) }
        },
        label,
        sorted ? (input.sortAscending ? ' ▲' : ' ▼') : ''
      )
    );
    if (key === 'state') {
      headRow.appendChild(h('th', null, 'Progress'));
    }
  }
  const body = h('tbody');
  for (const trial of sortTrials(trials, input.sortKey, input.sortAscending, metric)) {
    const flat = flattenHparams(trial.hparams);
    const isSelected = selected.has(trial.id);
    const checkbox = h('input', {
      props: { type: 'checkbox', checked: isSelected },
      attrs: { 'aria-label': `plot trial ${trial.id}` },
      on: { change: () => input.onToggle(trial.id, checkbox.checked) }
    });
    const state = trialDisplayState(trial);
    const note = trialExitNote(trial);
    const waitNote = trialWaitNote(trial);
    const stateTitle =
      state === 'QUEUED'
        ? // The scheduler's words: quota, fair share, priority (docs/scheduling.md).
          (trial.wait_reason ?? 'Active, waiting for a free slot')
        : state === 'PAUSING'
          ? `Pausing (${stopReasonText(trial.stop_reason)}): its run was asked to save a checkpoint and exit, and has not exited yet`
          : note
            ? `${trial.state}: ${note}`
            : trial.state;
    body.appendChild(
      h(
        'tr',
        {
          class: `${trial.id === best ? 'jp-mod-best' : ''}${isSelected ? ' jp-mod-selected' : ''}`,
          attrs: { 'data-trial-id': String(trial.id), 'data-state': state }
        },
        h('td', null, checkbox),
        h(
          'td',
          { class: 'jp-Det-trialId' },
          h('span', {
            class: 'jp-Det-swatch',
            style: { background: isSelected ? trialColor(trial.id, light) : 'transparent' }
          }),
          String(trial.id),
          trial.id === best
            ? h('span', { class: 'jp-Det-bestMark', title: `best ${metric}` }, ' ★')
            : null,
          runAgainButton(trial, input.onRunAgain)
        ),
        h(
          'td',
          { class: 'jp-Det-trialState' },
          stateBadge(state, stateTitle),
          note ? h('div', { class: 'jp-Det-exitNote', title: note }, note) : null,
          // Why it waits or is being preempted: visible, not only in the badge's tooltip.
          waitNote ? h('div', { class: 'jp-Det-waitNote', title: waitNote }, waitNote) : null,
          attachButton(trial, input.onAttach)
        ),
        h(
          'td',
          { class: 'jp-Det-trialProgress' },
          h(
            'span',
            { class: 'jp-Det-trialProgressInner' },
            stateProgressBar(trial.state, trial.progress),
            progressText(trial.state, trial.progress)
          )
        ),
        h('td', null, String(trial.steps_completed)),
        h('td', null, String(trial.restarts)),
        ...hparams.map(name =>
          h('td', { title: String(flat[name] ?? '') }, formatMetric(flat[name]))
        ),
        h('td', { class: 'jp-Det-latest' }, formatMetric(latestSearcherMetric(trial, metric))),
        h('td', { class: 'jp-Det-best' }, formatMetric(bestSearcherMetric(trial, metric)))
      )
    );
  }
  const selectedCount = trials.filter(t => selected.has(t.id)).length;
  const ranked = sortTrials(trials, 'best', input.smallerIsBetter, metric).map(t => t.id);
  const toolbar = h(
    'div',
    { class: 'jp-Det-trialsToolbar' },
    h('span', { class: 'jp-Det-selectedCount' }, `${selectedCount} of ${trials.length} selected`),
    h(
      'button',
      {
        class: 'jp-Det-button jp-Det-compareButton',
        props: { disabled: selectedCount < 2 },
        title:
          selectedCount < 2
            ? 'Select two or more trials to compare them'
            : 'Compare the selected trials side by side',
        on: { click: () => input.onCompare() }
      },
      'Compare'
    ),
    h(
      'button',
      {
        class: 'jp-Det-button',
        title: `The 5 trials with the best ${metric}`,
        on: { click: () => input.onSelect(ranked.slice(0, 5)) }
      },
      'Best 5'
    ),
    h(
      'button',
      {
        class: 'jp-Det-button',
        on: { click: () => input.onSelect(trials.map(t => t.id).sort((a, b) => a - b)) }
      },
      trials.length > input.maxSelected ? `First ${input.maxSelected}` : 'All'
    ),
    h('button', { class: 'jp-Det-button', on: { click: () => input.onSelect([]) } }, 'None')
  );
  return [
    toolbar,
    h(
      'div',
      { class: 'jp-Det-tableScroll' },
      h('table', { class: 'jp-Det-table jp-Det-trialsTable' }, h('thead', null, headRow), body)
    )
  ];
}

/** The experiment view's header: name, state, actions, progress and the search's summary. */
import { Dialog, showDialog } from '@jupyterlab/apputils';

import { kernelBadge, progressText, stateBadge, stateProgressBar } from './badges';
import { forkHandler } from './actionDialogs';
import { h } from '../dom';
import { formatMetric, formatStartTime } from '../model/format';
import {
  ExperimentAction,
  allowedActions,
  experimentDisplayState,
  stopReasonText
} from '../model/states';
import type { IExperiment } from '../api/types';

/** The actions' button labels and the confirmation each asks (`danger`: asks first). */
export const ACTION_TEXT: Record<
  ExperimentAction,
  { label: string; confirm: string; danger: boolean }
> = {
  pause: {
    label: 'Pause',
    confirm: 'Pause it? Running trials checkpoint and stop; Activate resumes them.',
    danger: false
  },
  activate: {
    label: 'Activate',
    confirm: 'Activate it? Its trials are scheduled again.',
    danger: false
  },
  kill: {
    label: 'Kill',
    confirm:
      'Kill it? Running trials are stopped at once, without a checkpoint. This cannot be undone.',
    danger: true
  },
  archive: {
    label: 'Archive',
    confirm: 'Archive it? It is hidden from the list (show archived to see it again).',
    danger: false
  },
  unarchive: {
    label: 'Unarchive',
    confirm: 'Unarchive it? It shows in the list again.',
    danger: false
  }
};

/**
 * Ask before an action that cannot be undone (`name`: the experiment as the dialog names it);
 * true when it may run. Only those ask: Pause and Activate undo each other, Kill does not.
 */
export async function confirmAction(action: ExperimentAction, name: string): Promise<boolean> {
  const text = ACTION_TEXT[action];
  if (!text.danger) {
    return true;
  }
  const result = await showDialog({
    title: `${text.label} ${name}`,
    body: text.confirm,
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: text.label })]
  });
  return result.button.accept;
}

/** The header's rows for `experiment`; `counts`: its trials running, queued and stopping. */
export function headerContent(
  experiment: IExperiment,
  counts: { running: number; queued: number; stopping: number; stopReason: string | null },
  onAction: (action: ExperimentAction) => void,
  onTensorBoard?: () => void
): (HTMLElement | null)[] {
  const allowed = allowedActions(experiment, counts.stopping);
  const actions = h('div', { class: 'jp-Det-actions' });
  for (const action of [
    'pause',
    'activate',
    'kill',
    'archive',
    'unarchive'
  ] as ExperimentAction[]) {
    if (
      (action === 'archive' && experiment.archived) ||
      (action === 'unarchive' && !experiment.archived) ||
      // A run in a kernel is started and stopped there; the master cannot pause it.
      ((action === 'pause' || action === 'activate') && experiment.unmanaged)
    ) {
      continue;
    }
    actions.appendChild(
      h(
        'button',
        {
          class: `jp-Det-button jp-Det-action jp-Det-action-${action}`,
          props: { disabled: !allowed.has(action) },
          attrs: { 'data-action': action },
          on: { click: () => onAction(action) }
        },
        ACTION_TEXT[action].label
      )
    );
  }
  // Fork… (actionDialogs.ts): a new experiment from its config and model definition.
  const onFork = forkHandler(experiment);
  if (onFork) {
    actions.appendChild(
      h(
        'button',
        {
          class: 'jp-Det-button jp-Det-fork',
          attrs: {
            title:
              'A new experiment from this one: its config (edit it first) and its model definition'
          },
          on: { click: () => onFork() }
        },
        'Fork…'
      )
    );
  }
  if (onTensorBoard) {
    actions.appendChild(
      h(
        'button',
        {
          class: 'jp-Det-button jp-Det-openTensorBoard',
          attrs: { title: "Open the trials' metrics and TensorBoard files in TensorBoard" },
          on: { click: () => onTensorBoard() }
        },
        'TensorBoard'
      )
    );
  }
  const searcher = experiment.searcher;
  const running =
    experiment.state === 'ACTIVE' && (counts.running || counts.queued)
      ? h(
          'span',
          {
            class: 'jp-Det-runCounts',
            title: 'Trials holding slots, and trials waiting for a free slot'
          },
          `${counts.running} running${counts.queued ? ` · ${counts.queued} queued` : ''}`
        )
      : null;
  const shownState = experimentDisplayState(experiment.state, counts, experiment.run_state);
  const stopping =
    shownState === 'PAUSING'
      ? h(
          'span',
          {
            class: 'jp-Det-stoppingNote',
            title:
              'The trials were asked to save a checkpoint and exit; a loop that does not check ' +
              'should_preempt() is terminated after the grace period'
          },
          // The experiment's run_state may say so before its trials' updates arrive.
          counts.stopping > 0
            ? `Pausing… (${stopReasonText(counts.stopReason)}): ${counts.stopping} ` +
                `trial${counts.stopping === 1 ? '' : 's'} still stopping`
            : 'Pausing…: trials still stopping'
        )
      : null;
  return [
    h(
      'div',
      { class: 'jp-Det-expHeader-top' },
      h('span', { class: 'jp-Det-expId' }, `#${experiment.id}`),
      h('span', { class: 'jp-Det-expName jp-Det-expTitle' }, experiment.name || '(unnamed)'),
      kernelBadge(experiment),
      stateBadge(shownState),
      experiment.archived ? h('span', { class: 'jp-Det-archived' }, 'archived') : null,
      actions
    ),
    h(
      'div',
      { class: 'jp-Det-expHeader-meta' },
      h(
        'span',
        { class: 'jp-Det-expProgress' },
        stateProgressBar(experiment.state, experiment.progress),
        progressText(experiment.state, experiment.progress)
      ),
      running,
      stopping,
      h(
        'span',
        null,
        `${searcher?.name ?? '?'} search on ${searcher?.metric ?? '?'} (${searcher?.smaller_is_better === false ? 'larger' : 'smaller'} is better)`
      ),
      h('span', { class: 'jp-Det-expBest' }, `best: ${formatMetric(experiment.best_validation)}`),
      h('span', null, `${experiment.num_trials} trial${experiment.num_trials === 1 ? '' : 's'}`),
      h(
        'span',
        { title: experiment.start_time },
        `started ${formatStartTime(experiment.start_time)}`
      ),
      experiment.notebook?.path
        ? h('span', { title: experiment.notebook.path }, `notebook ${experiment.notebook.path}`)
        : null
    ),
    experiment.description
      ? h('div', { class: 'jp-Det-expDescription' }, experiment.description)
      : null
  ];
}

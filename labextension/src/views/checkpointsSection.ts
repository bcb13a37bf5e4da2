/** The Checkpoints and Config sections of the experiment view. */
import { h } from '../dom';
import { formatBytes, formatMetric } from '../model/format';
import type { ICheckpoint } from '../api/types';
import { checkpointList, noCheckpointsText } from '../model/checkpointList';
import { canRegister } from '../model/actions';

const CHECKPOINT_COLUMNS = ['UUID', 'Trial', 'Steps', 'State', '', 'Size', 'Path'];

/** What the Checkpoints section needs besides the checkpoints. */
export interface ICheckpointsTableOptions {
  /** The searcher metric: the sort key and the best marker. */
  metric: string;
  smallerIsBetter: boolean;
  /** The experiment has ended: no checkpoint will come. */
  finished: boolean;
  /** List DELETED checkpoints too (off by default: their files are gone). */
  showDeleted: boolean;
  onShowDeleted: (show: boolean) => void;
  /** A "Use in notebook" button on each COMPLETED checkpoint (its files still exist). */
  useInNotebook?: (uuid: string) => Promise<void>;
  /** A "Register" button on each COMPLETED checkpoint (the model registry). */
  register?: (uuid: string) => Promise<void>;
}

/**
 * The experiment's checkpoints, best by the searcher metric first and marked, with their
 * validation metric; DELETED ones behind a toggle.
 */
export function checkpointsTable(
  checkpoints: Iterable<ICheckpoint>,
  options: ICheckpointsTableOptions
): HTMLElement {
  const { metric, useInNotebook } = options;
  const list = checkpointList(checkpoints, metric, options.smallerIsBetter, options.showDeleted);
  const toggle = deletedToggle(list.hiddenDeleted, options);
  if (!list.rows.length) {
    return h(
      'div',
      null,
      h('div', { class: 'jp-Det-empty' }, noCheckpointsText(options.finished, list.hiddenDeleted)),
      toggle
    );
  }
  const body = h('tbody');
  for (const checkpoint of list.rows) {
    const size = Object.values(checkpoint.resources ?? {}).reduce(
      (sum: number, n) => sum + (Number(n) || 0),
      0
    );
    const metrics = (checkpoint.validation_metrics ?? {}) as Record<string, unknown>;
    const best = checkpoint.uuid === list.best;
    body.appendChild(
      h(
        'tr',
        {
          class: best ? 'jp-Det-bestCheckpoint' : undefined,
          attrs: { 'data-uuid': checkpoint.uuid, 'data-state': checkpoint.state }
        },
        // First: a long path must not push the button out of sight.
        useInNotebook || options.register
          ? h(
              'td',
              { class: 'jp-Det-checkpointActions' },
              useInNotebook ? useButton(checkpoint, useInNotebook) : null,
              options.register ? registerButton(checkpoint, options.register) : null
            )
          : null,
        h('td', { class: 'jp-Det-mono' }, checkpoint.uuid),
        h('td', null, String(checkpoint.trial_id)),
        h('td', null, String(checkpoint.steps_completed)),
        h('td', null, checkpoint.state),
        h(
          'td',
          { title: JSON.stringify(metrics) },
          formatMetric(metrics[metric]),
          best ? h('span', { class: 'jp-Det-bestBadge' }, 'best') : null
        ),
        h('td', null, formatBytes(size)),
        h('td', { class: 'jp-Det-mono' }, checkpoint.path ?? '')
      )
    );
  }
  const headings = CHECKPOINT_COLUMNS.map(t => h('th', null, t || `validation ${metric}`));
  if (useInNotebook || options.register) {
    headings.unshift(h('th', null));
  }
  return h(
    'div',
    null,
    h(
      'table',
      { class: 'jp-Det-table jp-Det-checkpointsTable' },
      h('thead', null, h('tr', null, ...headings)),
      body
    ),
    toggle
  );
}

/** "Show N deleted" (or "Hide deleted") under the table; nothing when none was deleted. */
function deletedToggle(hidden: number, options: ICheckpointsTableOptions): HTMLElement | null {
  if (!hidden && !options.showDeleted) {
    return null;
  }
  const box = h('input', {
    attrs: { type: 'checkbox' }
  }) as HTMLInputElement;
  box.checked = options.showDeleted;
  box.addEventListener('change', () => options.onShowDeleted(box.checked));
  return h(
    'label',
    { class: 'jp-Det-showDeleted' },
    box,
    options.showDeleted ? ' show deleted checkpoints' : ` show ${hidden} deleted`
  );
}

function useButton(
  checkpoint: ICheckpoint,
  useInNotebook: (uuid: string) => Promise<void>
): HTMLElement | null {
  if (checkpoint.state !== 'COMPLETED') {
    return null; // its files are deleted: nothing to load
  }
  const button = h(
    'button',
    {
      class: 'jp-Det-button jp-Det-useInNotebook',
      title:
        'Insert a cell into the notebook that downloads this checkpoint and loads it ' +
        'with the loader of its framework',
      attrs: { type: 'button', 'data-uuid': checkpoint.uuid }
    },
    'Use in notebook'
  );
  button.addEventListener('click', () => {
    button.disabled = true;
    void useInNotebook(checkpoint.uuid).finally(() => {
      button.disabled = false;
    });
  });
  return button;
}

function registerButton(
  checkpoint: ICheckpoint,
  register: (uuid: string) => Promise<void>
): HTMLElement | null {
  if (!canRegister(checkpoint)) {
    return null;
  }
  const button = h(
    'button',
    {
      class: 'jp-Det-button jp-Det-register',
      title: 'Register this checkpoint as a version of a model in the model registry',
      attrs: { type: 'button', 'data-uuid': checkpoint.uuid }
    },
    'Register…'
  );
  button.addEventListener('click', () => {
    button.disabled = true;
    void register(checkpoint.uuid).finally(() => {
      button.disabled = false;
    });
  });
  return button;
}

/** The experiment's expanded config, as JSON (undefined: not loaded yet). */
export function configView(config: unknown): HTMLElement {
  return config
    ? h('pre', { class: 'jp-Det-config' }, JSON.stringify(config, null, 2))
    : h('div', { class: 'jp-Det-empty' }, 'Loading the config…');
}

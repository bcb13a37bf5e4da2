/** The Checkpoints and Config sections of the experiment view. */
import { h } from '../dom';
import { formatBytes, formatMetric } from '../model/format';
import type { ICheckpoint } from '../api/types';

const CHECKPOINT_COLUMNS = ['UUID', 'Trial', 'Steps', 'State', '', 'Size', 'Path'];

/**
 * The experiment's checkpoints by trial and step, with their validation `metric`; with
 * `useInNotebook`, a "Use in notebook" button on each COMPLETED one (its files still exist).
 */
export function checkpointsTable(
  checkpoints: Iterable<ICheckpoint>,
  metric: string,
  useInNotebook?: (uuid: string) => Promise<void>
): HTMLElement {
  const sorted = [...checkpoints].sort(
    (a, b) => a.trial_id - b.trial_id || a.steps_completed - b.steps_completed
  );
  if (!sorted.length) {
    return h('div', { class: 'jp-Det-empty' }, 'No checkpoints yet.');
  }
  const body = h('tbody');
  for (const checkpoint of sorted) {
    const size = Object.values(checkpoint.resources ?? {}).reduce(
      (sum, n) => sum + (Number(n) || 0),
      0
    );
    const metrics = (checkpoint.validation_metrics ?? {}) as Record<string, unknown>;
    body.appendChild(
      h(
        'tr',
        { attrs: { 'data-uuid': checkpoint.uuid } },
        // First: a long path must not push the button out of sight.
        useInNotebook ? h('td', null, useButton(checkpoint, useInNotebook)) : null,
        h('td', { class: 'jp-Det-mono' }, checkpoint.uuid),
        h('td', null, String(checkpoint.trial_id)),
        h('td', null, String(checkpoint.steps_completed)),
        h('td', null, checkpoint.state),
        h('td', { title: JSON.stringify(metrics) }, formatMetric(metrics[metric])),
        h('td', null, formatBytes(size)),
        h('td', { class: 'jp-Det-mono' }, checkpoint.path ?? '')
      )
    );
  }
  const headings = CHECKPOINT_COLUMNS.map(t => h('th', null, t || `validation ${metric}`));
  if (useInNotebook) {
    headings.unshift(h('th', null));
  }
  return h(
    'table',
    { class: 'jp-Det-table jp-Det-checkpointsTable' },
    h('thead', null, h('tr', null, ...headings)),
    body
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

/** The experiment's expanded config, as JSON (undefined: not loaded yet). */
export function configView(config: unknown): HTMLElement {
  return config
    ? h('pre', { class: 'jp-Det-config' }, JSON.stringify(config, null, 2))
    : h('div', { class: 'jp-Det-empty' }, 'Loading the config…');
}

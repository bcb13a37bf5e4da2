/**
 * How a state and a progress look, the same in the sidebar, the experiment view and the
 * trials table: a coloured badge, and a bar coloured by the state (red and striped for ERROR,
 * grey for CANCELED, green and full for COMPLETED).
 */
import { h } from '../dom';
import { formatPercent } from '../model/format';
import { displayProgress, stateCategory } from '../model/states';

export function stateBadge(state: string, title?: string): HTMLElement {
  return h(
    'span',
    {
      class: `jp-Det-state jp-Det-state-${stateCategory(state)}`,
      title: title ?? '',
      attrs: { 'data-state': state }
    },
    state
  );
}

/**
 * The marker of an experiment that trains in a Jupyter kernel (`det.experimental.core_v2`,
 * `%%det_submit --local`): the master stores its reports but runs nothing for it. Null for others.
 */
export function kernelBadge(experiment: {
  unmanaged?: boolean;
  state: string;
}): HTMLElement | null {
  if (!experiment.unmanaged) {
    return null;
  }
  const live = experiment.state === 'ACTIVE';
  return h(
    'span',
    {
      class: `jp-Det-kernel${live ? ' jp-Det-kernel-live' : ''}`,
      title: live
        ? 'Training in a Jupyter kernel (core_v2): the master tracks it but does not run it'
        : 'Trained in a Jupyter kernel (core_v2)',
      attrs: { 'data-kernel': live ? 'live' : 'ended' }
    },
    'kernel'
  );
}

/** The progress bar of an experiment or trial in this state. */
export function stateProgressBar(state: string, progress: number | null | undefined): HTMLElement {
  const fraction = displayProgress(state, progress);
  const percent = fraction ?? 0;
  // ERROR fills the bar with red stripes whatever was reported: the master may leave a failed
  // experiment at 100 %, and a full bar must not read as "done".
  const width = state === 'ERROR' ? 1 : percent;
  const label =
    state === 'ERROR'
      ? `ended in ERROR at ${formatPercent(fraction)}`
      : `progress ${formatPercent(fraction)}`;
  return h(
    'div',
    {
      class: `jp-Det-progress jp-Det-progress-${stateCategory(state)}`,
      title: label,
      attrs: {
        role: 'progressbar',
        'aria-valuenow': String(Math.round(percent * 100)),
        'aria-valuemin': '0',
        'aria-valuemax': '100',
        'aria-label': label,
        'data-state': state
      }
    },
    h('div', { class: 'jp-Det-progress-fill', style: { width: `${(width * 100).toFixed(1)}%` } })
  );
}

/** The percentage next to a bar; "failed" (in red) for ERROR. */
export function progressText(
  state: string,
  progress: number | null | undefined,
  className = ''
): HTMLElement {
  const percent = formatPercent(displayProgress(state, progress));
  return h(
    'span',
    {
      class: `jp-Det-percent jp-Det-percent-${stateCategory(state)} ${className}`.trim(),
      title:
        state === 'ERROR'
          ? `ended in ERROR (last reported progress ${percent})`
          : `progress ${percent}`
    },
    state === 'ERROR' ? 'failed' : percent
  );
}

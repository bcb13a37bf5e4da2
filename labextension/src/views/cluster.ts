/**
 * The cluster strip at the bottom of the sidebar: every slot (CPU or GPU), which trial holds
 * it, and each GPU's name, memory and utilization (`GET /resources`).
 */
import { DeterminedClient, describeError } from '../api/client';
import { h, replaceChildren } from '../dom';
import { formatBytes } from '../model/format';
import type { IResources } from '../api/types';
import { clusterNotice } from '../model/clusterStatus';

export class ClusterStrip {
  readonly node: HTMLElement;
  private _timer: number | null = null;
  private _soon: number | null = null;
  private _body: HTMLElement;

  constructor(
    private readonly _client: DeterminedClient,
    readonly intervalMs = 10000
  ) {
    this._body = h('div', { class: 'jp-Det-cluster-body' }, 'Loading cluster…');
    this.node = h(
      'div',
      { class: 'jp-Det-cluster' },
      h('div', { class: 'jp-Det-cluster-title' }, 'Cluster'),
      this._body
    );
  }

  start(): void {
    if (this._timer === null) {
      void this.refresh();
      // Utilization changes without events: a slow poll keeps it roughly current.
      this._timer = window.setInterval(() => void this.refresh(), this.intervalMs);
    }
  }

  /** Refresh shortly (trial events come in bursts; one request covers the burst). */
  refreshSoon(): void {
    if (this._soon === null) {
      this._soon = window.setTimeout(() => {
        this._soon = null;
        void this.refresh();
      }, 500);
    }
  }

  async refresh(): Promise<void> {
    try {
      this.render(await this._client.resources());
    } catch (error) {
      replaceChildren(
        this._body,
        h(
          'div',
          { class: 'jp-Det-error' },
          `Cannot load cluster resources: ${describeError(error)}`
        )
      );
    }
  }

  render(resources: IResources): void {
    const used = resources.slots.filter(s => s.allocation_id).length;
    const summary = h(
      'div',
      { class: 'jp-Det-cluster-summary' },
      `${resources.slots.length} slot${resources.slots.length === 1 ? '' : 's'}, ${used} in use · ${resources.gpus.length} GPU${resources.gpus.length === 1 ? '' : 's'}`
    );
    const slots = h('div', { class: 'jp-Det-slots' });
    for (const slot of resources.slots) {
      const holder =
        slot.trial_id !== null && slot.trial_id !== undefined ? `trial ${slot.trial_id}` : 'free';
      slots.appendChild(
        h(
          'span',
          {
            class: `jp-Det-slot ${slot.allocation_id ? 'jp-Det-slot-busy' : 'jp-Det-slot-free'}`,
            title: slot.allocation_id
              ? `slot ${slot.id} (${slot.type}) held by allocation ${slot.allocation_id}`
              : `slot ${slot.id} (${slot.type}) is free`,
            attrs: { 'data-slot-id': String(slot.id) }
          },
          `${slot.type} ${slot.id}: ${holder}`
        )
      );
    }
    const gpus = h('div', { class: 'jp-Det-gpus' });
    for (const gpu of resources.gpus) {
      const holder = resources.slots.find(s => s.gpu?.uuid === gpu.uuid && s.trial_id !== null);
      gpus.appendChild(
        h(
          'div',
          { class: 'jp-Det-gpu', title: gpu.uuid },
          h('span', { class: 'jp-Det-gpu-name' }, `GPU ${gpu.index} ${gpu.name}`),
          h('span', null, `${formatBytes(gpu.memory_used)} / ${formatBytes(gpu.memory_total)}`),
          h('span', null, `${gpu.utilization}%`),
          h('span', null, holder ? `trial ${holder.trial_id}` : 'free')
        )
      );
    }
    const notice = clusterNotice(resources.cluster);
    replaceChildren(
      this._body,
      notice
        ? h('div', { class: `jp-Det-cluster-notice jp-Det-${notice.kind}` }, notice.text)
        : null,
      summary,
      slots,
      resources.gpus.length ? gpus : null
    );
  }

  dispose(): void {
    if (this._timer !== null) {
      window.clearInterval(this._timer);
    }
    if (this._soon !== null) {
      window.clearTimeout(this._soon);
    }
  }
}

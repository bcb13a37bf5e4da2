/**
 * The sidebar's "Queue" section (docs/sidebar.md): the master's job queue per resource pool, in
 * queue order (`GET /job-queues`): position, job `name (id)`, user, priority, weight, slots
 * held/needed, Queued or Scheduled, and the scheduler's reason a queued job waits, in words, on
 * a line of its own. On a job the signed-in user may change (theirs, or any for an admin) the
 * priority and weight are fields (Enter or leaving the field sets them) and ↑ / ↓ move it ahead
 * of the job before it or behind the job after it (`POST /job-queues`); the master's answer to a
 * refused change (403, 400, 404) is shown as it says, the list and the typed value kept.
 *
 * Live: experiment and trial events (a job starts, waits, ends) reload it shortly after; a
 * slow poll catches reorders made elsewhere (`det job update`), which send no event.
 */
import { DeterminedClient, describeError } from '../api/client';
import { EventHub } from '../api/events';
import { IJob, IQueueUser, listJobQueue, queueUser, updateJobQueue } from '../api/jobQueue';
import { errorBox, h, replaceChildren } from '../dom';
import {
  EMPTY_QUEUE_HINT,
  EMPTY_QUEUE_TEXT,
  JobQueueUpdate,
  canChange,
  groupByPool,
  jobLabel,
  jobStateText,
  moveUpdate,
  parsePriority,
  parseWeight,
  slotsText,
  weightText
} from '../model/jobQueue';
import { oncePerFrame } from '../model/schedule';

type Field = 'priority' | 'weight';

export class QueueSection {
  readonly node: HTMLElement;
  private _jobs: IJob[] = [];
  private _loaded = false;
  private _user: IQueueUser | null = null;
  private _userLoaded = false;
  private _body: HTMLElement;
  private _count: HTMLElement;
  /** Why the last load failed (cleared by the next load that works). */
  private _message: HTMLElement;
  /** Why the last change was refused (cleared by the next change that works). */
  private _actionMessage: HTMLElement;
  private _unsubscribe: (() => void) | null = null;
  private _timer: number | null = null;
  private _soon: number | null = null;
  private _loading: Promise<void> | null = null;
  private _again = false;
  /** Values typed that the master refused: shown again (marked) until edited or set. */
  private _drafts = new Map<string, string>();
  /** A render that waits until the user leaves a field (a rebuild would drop their typing). */
  private _deferred = false;
  private _busy = false;
  /** What the rows on screen show (render skips an unchanged queue). */
  private _renderedKey = '';

  constructor(
    private readonly _client: DeterminedClient,
    private readonly _hub: EventHub,
    private readonly _openExperiment: (id: number) => void,
    readonly pollMs = 10000
  ) {
    this._count = h('span', { class: 'jp-Det-queue-count' });
    this._message = h('div', { class: 'jp-Det-message' });
    this._actionMessage = h('div', { class: 'jp-Det-message jp-Det-queue-actionMessage' });
    this._body = h('div', { class: 'jp-Det-queue-body' }, 'Loading the queue…');
    this.node = h(
      'div',
      {
        class: 'jp-Det-queue',
        attrs: { 'data-loaded': 'false', role: 'region', 'aria-label': 'Job queue' }
      },
      h(
        'div',
        { class: 'jp-Det-queue-title' },
        h(
          'button',
          {
            class: 'jp-Det-queue-toggle',
            title: 'Show or hide the job queue',
            attrs: { 'aria-expanded': 'true' },
            on: {
              click: event => {
                // Folded, the panel's room goes to the experiment table; loading goes on.
                const button = event.currentTarget as HTMLElement;
                const open = this.node.dataset.collapsed === 'true';
                this.node.dataset.collapsed = String(!open);
                button.setAttribute('aria-expanded', String(open));
              }
            }
          },
          'Queue'
        ),
        this._count
      ),
      this._message,
      this._actionMessage,
      this._body
    );
    this.node.addEventListener('focusout', () => {
      if (this._deferred) {
        // After the focus has moved: a click on ↑ in another row must not be rebuilt away.
        window.setTimeout(() => this._queueRender(), 0);
      }
    });
  }

  /** Start listening and load the queue (idempotent). */
  start(): Promise<void> {
    if (!this._unsubscribe) {
      this._unsubscribe = this._hub.subscribe({
        types: ['experiment', 'trial'],
        onEvent: () => this.refreshSoon(),
        onPoll: () => void this.refresh()
      });
      this._timer = window.setInterval(() => void this.refresh(), this.pollMs);
    }
    return this.refresh();
  }

  /** Reload shortly (events come in bursts; one request covers the burst). */
  refreshSoon(): void {
    if (this._soon === null) {
      this._soon = window.setTimeout(() => {
        this._soon = null;
        void this.refresh();
      }, 300);
    }
  }

  /** Reload the queue; a call while one loads reloads once more after it (a change just made
   * must show, not the answer to a request sent before it). */
  refresh(): Promise<void> {
    if (this._loading) {
      this._again = true;
      return this._loading;
    }
    this._loading = (async () => {
      do {
        this._again = false;
        await this._load();
      } while (this._again);
    })().finally(() => {
      this._loading = null;
    });
    return this._loading;
  }

  private async _load(): Promise<void> {
    if (!this._userLoaded) {
      try {
        this._user = await queueUser(this._client);
      } catch {
        this._user = null; // unknown: actions offered, the master decides (403 shown)
      }
      this._userLoaded = true;
    }
    try {
      this._jobs = await listJobQueue(this._client);
      this._loaded = true;
      replaceChildren(this._message);
      this._queueRender();
    } catch (error) {
      // The last list stays on screen: an error never empties the queue.
      replaceChildren(this._message, errorBox(`Cannot load the queue: ${describeError(error)}`));
      if (!this._loaded) {
        replaceChildren(this._body);
      }
    }
  }

  get jobs(): readonly IJob[] {
    return this._jobs;
  }

  private readonly _queueRender = oncePerFrame(() => this.render());

  /** Render the section now (unless the user is typing in one of its fields). */
  render(): void {
    const active = document.activeElement;
    if (active instanceof HTMLInputElement && this.node.contains(active)) {
      this._deferred = true;
      return;
    }
    this._deferred = false;
    this.node.dataset.loaded = String(this._loaded);
    if (!this._loaded) {
      return;
    }
    // A poll that changed nothing leaves the rows alone (a focused button keeps its focus).
    const key = JSON.stringify([this._jobs, this._user, [...this._drafts], this._busy]);
    if (key === this._renderedKey) {
      return;
    }
    this._renderedKey = key;
    this._count.textContent = ` (${this._jobs.length})`;
    if (!this._jobs.length) {
      replaceChildren(
        this._body,
        h(
          'div',
          { class: 'jp-Det-queue-empty' },
          h('div', { class: 'jp-Det-emptyTitle' }, EMPTY_QUEUE_TEXT),
          h('div', { class: 'jp-Det-hint' }, EMPTY_QUEUE_HINT)
        )
      );
      return;
    }
    const pools = groupByPool(this._jobs);
    replaceChildren(
      this._body,
      ...pools.map(({ pool, jobs }) =>
        h(
          'div',
          { class: 'jp-Det-queue-pool', attrs: { 'data-pool': pool } },
          h(
            'div',
            { class: 'jp-Det-queue-poolName' },
            `Pool ${pool || 'default'} · ${jobs.length} job${jobs.length === 1 ? '' : 's'}`
          ),
          this._table(jobs)
        )
      )
    );
  }

  private _table(jobs: IJob[]): HTMLElement {
    const head = h(
      'tr',
      null,
      h('th', { class: 'jp-Det-q-pos', title: 'Position in the queue of this pool' }, '#'),
      h('th', { class: 'jp-Det-q-job' }, 'Job'),
      h('th', { class: 'jp-Det-q-user' }, 'User'),
      h('th', { class: 'jp-Det-q-prio', title: '1–99, smaller runs first' }, 'Priority'),
      h('th', { class: 'jp-Det-q-weight', title: 'Share of its user’s slots' }, 'Weight'),
      h('th', { class: 'jp-Det-q-slots', title: 'Slots held / needed' }, 'Slots'),
      h('th', { class: 'jp-Det-q-state' }, 'State'),
      h('th', { class: 'jp-Det-q-move', attrs: { 'aria-label': 'Move' } })
    );
    const body = h('tbody');
    for (const job of jobs) {
      body.append(...this._rows(job, jobs));
    }
    return h(
      'div',
      { class: 'jp-Det-queue-scroll' },
      h('table', { class: 'jp-Det-queueTable' }, h('thead', null, head), body)
    );
  }

  private _rows(job: IJob, poolJobs: IJob[]): HTMLElement[] {
    const editable = canChange(job, this._user);
    const state = jobStateText(job);
    const experimentId = Number(job.entityId);
    const name = h(
      'button',
      {
        class: 'jp-Det-linkButton jp-Det-q-name',
        title: `Open experiment ${job.entityId}`,
        on: { click: () => Number.isFinite(experimentId) && this._openExperiment(experimentId) }
      },
      jobLabel(job)
    );
    const move = (direction: 'up' | 'down'): HTMLElement => {
      const update = moveUpdate(poolJobs, job.jobId, direction);
      const neighbour =
        update && ('aheadOf' in update ? update.aheadOf : 'behindOf' in update && update.behindOf);
      return h(
        'button',
        {
          class: `jp-Det-button jp-Det-q-${direction}`,
          title: update
            ? `Move ${direction === 'up' ? 'ahead of' : 'behind'} ${neighbour}`
            : direction === 'up'
              ? 'First in this pool'
              : 'Last in this pool',
          props: { disabled: !update || this._busy },
          attrs: { 'aria-label': `move ${job.jobId} ${direction}` },
          on: { click: () => update && void this._apply(update, `move ${job.jobId} ${direction}`) }
        },
        direction === 'up' ? '↑' : '↓'
      );
    };
    const row = h(
      'tr',
      {
        class: 'jp-Det-queueRow',
        title: job.waitReason ?? '',
        attrs: {
          'data-job-id': job.jobId,
          'data-state': state,
          'data-editable': String(editable)
        }
      },
      h('td', { class: 'jp-Det-q-pos' }, String(job.position)),
      h(
        'td',
        { class: 'jp-Det-q-job' },
        name,
        // In a narrow panel the user and state columns give way; they show here instead.
        h(
          'span',
          { class: 'jp-Det-q-narrowMeta' },
          `${job.username} · ${state}`,
          h('span', { class: 'jp-Det-q-narrowSlots' }, ` · ${slotsText(job)} slots`)
        )
      ),
      h('td', { class: 'jp-Det-q-user' }, job.username),
      h('td', { class: 'jp-Det-q-prio' }, this._field(job, 'priority', editable)),
      h('td', { class: 'jp-Det-q-weight' }, this._field(job, 'weight', editable)),
      h('td', { class: 'jp-Det-q-slots' }, slotsText(job)),
      h(
        'td',
        { class: 'jp-Det-q-state' },
        h('span', { class: `jp-Det-q-stateBadge jp-Det-q-${state.toLowerCase()}` }, state)
      ),
      h('td', { class: 'jp-Det-q-move' }, editable && move('up'), editable && move('down'))
    );
    const rows = [row];
    if (job.waitReason) {
      rows.push(
        h(
          'tr',
          { class: 'jp-Det-queueReason', attrs: { 'data-job-id': job.jobId } },
          h('td', { class: 'jp-Det-q-pos' }),
          h('td', { attrs: { colspan: '7' } }, job.waitReason)
        )
      );
    }
    return rows;
  }

  private _field(job: IJob, field: Field, editable: boolean): HTMLElement | string {
    const current = field === 'priority' ? String(job.priority) : weightText(job.weight);
    if (!editable) {
      return current;
    }
    const key = `${job.jobId}:${field}`;
    const draft = this._drafts.get(key);
    const input = h('input', {
      class: `jp-Det-input jp-Det-q-input jp-Det-q-${field}Input`,
      props: { type: 'text', value: draft ?? current, inputMode: 'decimal' },
      title:
        field === 'priority'
          ? 'Priority 1–99 (smaller runs first, and may preempt); Enter sets it'
          : 'Weight > 0 (its share of its user’s slots under fair share); Enter sets it',
      attrs: {
        'aria-label': `${field} of ${job.jobId}`,
        ...(draft !== undefined ? { 'aria-invalid': 'true' } : {})
      },
      on: {
        keydown: event => {
          if (event.key === 'Enter') {
            input.blur(); // 'change' fires and sets it
          } else if (event.key === 'Escape') {
            this._drafts.delete(key);
            input.value = current;
            input.removeAttribute('aria-invalid');
            input.blur();
          }
        },
        change: () => void this._setField(job, field, input.value, key)
      }
    });
    return input;
  }

  private async _setField(job: IJob, field: Field, text: string, key: string): Promise<void> {
    const parsed = field === 'priority' ? parsePriority(text) : parseWeight(text);
    if (parsed.error !== undefined) {
      this._drafts.set(key, text);
      replaceChildren(this._actionMessage, errorBox(`${job.jobId}: ${parsed.error}`));
      this._queueRender();
      return;
    }
    const update: JobQueueUpdate =
      field === 'priority'
        ? { jobId: job.jobId, priority: parsed.value }
        : { jobId: job.jobId, weight: parsed.value };
    if (!(await this._apply(update, `set the ${field} of ${job.jobId}`))) {
      this._drafts.set(key, text);
    } else {
      this._drafts.delete(key);
    }
    this._queueRender();
  }

  /** Send one change; on success reload, on refusal show the master's words. */
  private async _apply(update: JobQueueUpdate, what: string): Promise<boolean> {
    this._busy = true;
    this._queueRender();
    try {
      await updateJobQueue(this._client, [update]);
      replaceChildren(this._actionMessage);
      return true;
    } catch (error) {
      replaceChildren(this._actionMessage, errorBox(`Cannot ${what}: ${describeError(error)}`));
      return false;
    } finally {
      this._busy = false;
      await this.refresh();
    }
  }

  dispose(): void {
    this._unsubscribe?.();
    this._unsubscribe = null;
    if (this._timer !== null) {
      window.clearInterval(this._timer);
    }
    if (this._soon !== null) {
      window.clearTimeout(this._soon);
    }
  }
}

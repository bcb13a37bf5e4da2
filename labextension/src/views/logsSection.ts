/**
 * The Logs section of the experiment view: a trial picker, rank and level filters, and the
 * trial's log lines, followed live through the event hub while the section is shown.
 */
import { DeterminedClient, describeError, isMasterStopping } from '../api/client';
import { EventHub } from '../api/events';
import { errorBox, h, replaceChildren, select } from '../dom';
import { LOG_LEVELS, LogLevel, filterLogs, formatLogLine, logLevel } from '../model/logs';
import { LogBuffer } from '../model/model';
import type { ILogLine } from '../api/types';

/** How many of a trial's last lines are loaded when it is picked. */
const INITIAL_TAIL = 2000;

export class LogsSection {
  /** The section's content; the view puts it in its Logs tab. */
  readonly node: HTMLElement = h('div', { class: 'jp-Det-logsSection' });
  private _trialId: number | null = null;
  private _logs: LogBuffer | null = null;
  private _rank: number | null = null;
  private _level: LogLevel = 'DEBUG';
  private _follow = true;
  private _shown = false;
  private _unsubscribe: (() => void) | null = null;
  private _lines: HTMLElement = h('div', { class: 'jp-Det-logLines' });
  private _trialIds: number[] = [];

  constructor(
    private readonly _client: DeterminedClient,
    private readonly _hub: EventHub,
    /** Called when lines arrived: the view renders them in its next frame (`renderLines`). */
    private readonly _onLines: () => void
  ) {}

  /** Whether the section is on screen: only then are the logs followed. */
  setShown(shown: boolean): void {
    this._shown = shown;
    this._updateSubscription();
  }

  /** A log event of the experiment's stream: kept when it is of the trial shown. */
  addEvent(line: ILogLine): void {
    this._logs?.add([line]);
  }

  /** Show one trial's logs (the notebook widget's "Show logs" goes here). */
  async selectTrial(trialId: number | null): Promise<void> {
    this._trialId = trialId;
    this._logs = trialId === null ? null : new LogBuffer(trialId);
    this._logs?.changed.connect(() => this._onLines());
    this._updateSubscription();
    this.renderControls(this._trialIds);
    this.renderLines();
    if (trialId !== null && this._logs) {
      const logs = this._logs;
      try {
        logs.add(await this._client.trialLogs(trialId, { tail: INITIAL_TAIL }));
      } catch (error) {
        // The master stopping is said once, by the experiment view, not here too.
        if (!isMasterStopping(error)) {
          replaceChildren(
            this._lines,
            errorBox(`Cannot load the logs of trial ${trialId}: ${describeError(error)}`)
          );
        }
      }
    }
  }

  /** Fetch what was logged since the last line seen (after a reconnect, or on Refresh). */
  async catchUp(): Promise<void> {
    const logs = this._logs;
    if (!logs || !this._shown) {
      return;
    }
    try {
      logs.add(await this._client.trialLogs(logs.trialId, { after_id: logs.lastId }));
    } catch (error) {
      console.warn('jupyter-determined: cannot fetch logs', error);
    }
  }

  /** The pickers, for the experiment's trials now (`trialIds`, ascending). */
  renderControls(trialIds: number[]): void {
    this._trialIds = trialIds;
    if (this._trialId === null && trialIds.length) {
      void this.selectTrial(trialIds[0]);
      return;
    }
    if (!trialIds.length) {
      replaceChildren(this.node, h('div', { class: 'jp-Det-empty' }, 'No trials yet, so no logs.'));
      return;
    }
    const trialPicker = select(
      trialIds.map(id => [String(id), `trial ${id}`] as [string, string]),
      String(this._trialId ?? ''),
      value => void this.selectTrial(Number(value)),
      'jp-Det-select jp-Det-logTrial'
    );
    const ranks = this._logs?.ranks() ?? [];
    const rankPicker = select(
      [['', 'all ranks'], ...ranks.map(r => [String(r), `rank ${r}`] as [string, string])],
      this._rank === null ? '' : String(this._rank),
      value => {
        this._rank = value === '' ? null : Number(value);
        this.renderLines();
      },
      'jp-Det-select jp-Det-logRank'
    );
    const levelPicker = select(
      LOG_LEVELS.map(l => [l, `${l} and above`] as [string, string]),
      this._level,
      value => {
        this._level = value as LogLevel;
        this.renderLines();
      },
      'jp-Det-select jp-Det-logLevel'
    );
    const follow = h('input', {
      class: 'jp-Det-follow',
      props: { type: 'checkbox', checked: this._follow },
      on: {
        change: () => {
          this._follow = follow.checked;
          this._updateSubscription();
          if (this._follow) {
            void this.catchUp();
          }
        }
      }
    });
    const refresh = h(
      'button',
      { class: 'jp-Det-button', on: { click: () => void this.catchUp() } },
      'Refresh'
    );
    const controls = h(
      'div',
      { class: 'jp-Det-logControls' },
      trialPicker,
      rankPicker,
      levelPicker,
      h('label', { class: 'jp-Det-checkbox' }, follow, 'follow'),
      refresh
    );
    replaceChildren(this.node, controls, this._lines);
  }

  /** The lines that pass the filters; scrolled to the end while following. */
  renderLines(): void {
    if (!this._logs) {
      replaceChildren(this._lines);
      return;
    }
    const lines = filterLogs(this._logs.lines, { rank: this._rank, minLevel: this._level });
    const fragment = document.createDocumentFragment();
    for (const line of lines) {
      const level = logLevel(line).toLowerCase();
      fragment.appendChild(
        h(
          'div',
          { class: `jp-Det-logLine jp-Det-log-${level} jp-Det-log-${line.stream}` },
          formatLogLine(line)
        )
      );
    }
    if (!lines.length) {
      const empty = this._logs.lines.length ? 'No lines match the filter.' : 'No log lines yet.';
      fragment.appendChild(h('div', { class: 'jp-Det-empty' }, empty));
    }
    replaceChildren(this._lines, fragment);
    if (this._follow) {
      this._lines.scrollTop = this._lines.scrollHeight;
    }
  }

  dispose(): void {
    this._unsubscribe?.();
    this._unsubscribe = null;
  }

  private _updateSubscription(): void {
    const want = this._shown && this._follow && this._trialId !== null;
    if (want && !this._unsubscribe) {
      this._unsubscribe = this._hub.subscribe({
        types: ['log'],
        onEvent: (_type, payload) => this.addEvent(payload as ILogLine),
        onPoll: () => void this.catchUp()
      });
    } else if (!want && this._unsubscribe) {
      this._unsubscribe();
      this._unsubscribe = null;
    }
  }
}

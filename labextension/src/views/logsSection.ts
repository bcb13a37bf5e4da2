/**
 * The Logs section of the experiment view: a trial picker ("all trials" too: every trial's
 * lines interleaved as they were written, each marked with its trial), rank and level filters,
 * a search box, and the lines, followed live through the event hub while the section is shown.
 *
 * Search filters the lines shown at once (any case); in the all-trials view it also asks the
 * master for the matching lines of the whole history (`GET /experiments/{id}/logs?search=`),
 * so a match older than the loaded tail is found too.
 */
import { DeterminedClient, describeError, isMasterStopping } from '../api/client';
import { EventHub } from '../api/events';
import { errorBox, h, replaceChildren, select } from '../dom';
import { LOG_LEVELS, LogLevel, filterLogs, formatLogLine, logLevel } from '../model/logs';
import { LogBuffer } from '../model/model';
import type { ILogLine } from '../api/types';

/** How many of a trial's last lines are loaded when it is picked. */
const INITIAL_TAIL = 2000;
/** The trial picker's value for every trial. */
export const ALL_TRIALS = 'all';
/** How long typing pauses before the all-trials view asks the master (ms). */
const SEARCH_DELAY_MS = 300;

export class LogsSection {
  /** The section's content; the view puts it in its Logs tab. */
  readonly node: HTMLElement = h('div', { class: 'jp-Det-logsSection' });
  private _trialId: number | null = null;
  /** Every trial's lines (the picker's "all trials"). */
  private _allTrials = false;
  private _search = '';
  private _searchTimer = 0;
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
    private readonly _onLines: () => void,
    /** The experiment (for the all-trials view); none: no such choice. */
    private readonly _experimentId: number | null = null
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

  /** Show every trial's lines, those matching the search when there is one. */
  async selectAllTrials(rebuildControls = true): Promise<void> {
    const experimentId = this._experimentId;
    if (experimentId === null) {
      return;
    }
    this._allTrials = true;
    this._trialId = null;
    const known = () => new Set(this._trialIds);
    let trials = known();
    const logs = new LogBuffer(null, 10000, id => trials.has(id) || (trials = known()).has(id));
    this._logs = logs;
    logs.changed.connect(() => this._onLines());
    this._updateSubscription();
    if (rebuildControls) {
      this.renderControls(this._trialIds);
    }
    this.renderLines();
    try {
      const search = this._search.trim();
      logs.add(await this._client.experimentLogs(experimentId, { tail: INITIAL_TAIL, search }));
    } catch (error) {
      if (!isMasterStopping(error) && this._logs === logs) {
        replaceChildren(
          this._lines,
          errorBox(`Cannot load the logs of experiment ${experimentId}: ${describeError(error)}`)
        );
      }
    }
  }

  /** Show one trial's logs (the notebook widget's "Show logs" goes here). */
  async selectTrial(trialId: number | null): Promise<void> {
    this._allTrials = false;
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
      if (logs.trialId === null) {
        if (this._experimentId !== null) {
          logs.add(
            await this._client.experimentLogs(this._experimentId, { after_id: logs.lastId })
          );
        }
      } else {
        logs.add(await this._client.trialLogs(logs.trialId, { after_id: logs.lastId }));
      }
    } catch (error) {
      console.warn('jupyter-determined: cannot fetch logs', error);
    }
  }

  /** The pickers, for the experiment's trials now (`trialIds`, ascending). */
  renderControls(trialIds: number[]): void {
    this._trialIds = trialIds;
    if (this._trialId === null && !this._allTrials && trialIds.length) {
      void this.selectTrial(trialIds[0]);
      return;
    }
    if (!trialIds.length) {
      replaceChildren(this.node, h('div', { class: 'jp-Det-empty' }, 'No trials yet, so no logs.'));
      return;
    }
    const choices = trialIds.map(id => [String(id), `trial ${id}`] as [string, string]);
    if (this._experimentId !== null && trialIds.length > 1) {
      choices.unshift([ALL_TRIALS, 'all trials']);
    }
    const trialPicker = select(
      choices,
      this._allTrials ? ALL_TRIALS : String(this._trialId ?? ''),
      value =>
        void (value === ALL_TRIALS ? this.selectAllTrials() : this.selectTrial(Number(value))),
      'jp-Det-select jp-Det-logTrial'
    );
    const search = h('input', {
      class: 'jp-Det-input jp-Det-logSearch',
      props: { type: 'search', value: this._search, placeholder: 'Search the logs' },
      title: this._allTrials
        ? "Lines containing this text (any case), from every trial's whole log"
        : 'Lines containing this text (any case)',
      attrs: { 'aria-label': 'Search the logs' },
      on: { input: () => this._onSearch(search.value) }
    });
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
      search,
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
    const lines = filterLogs(this._logs.lines, {
      rank: this._rank,
      minLevel: this._level,
      search: this._search
    });
    const withTrial = this._logs.trialId === null;
    const fragment = document.createDocumentFragment();
    for (const line of lines) {
      const level = logLevel(line).toLowerCase();
      fragment.appendChild(
        h(
          'div',
          {
            class: `jp-Det-logLine jp-Det-log-${level} jp-Det-log-${line.stream}`,
            attrs: { 'data-trial-id': String(line.trial_id) }
          },
          formatLogLine(line, withTrial)
        )
      );
    }
    if (!lines.length) {
      const empty = this._search.trim()
        ? `No lines contain "${this._search.trim()}".`
        : this._logs.lines.length
          ? 'No lines match the filter.'
          : 'No log lines yet.';
      fragment.appendChild(h('div', { class: 'jp-Det-empty' }, empty));
    }
    replaceChildren(this._lines, fragment);
    if (this._follow) {
      this._lines.scrollTop = this._lines.scrollHeight;
    }
  }

  /** The search changed: filter now; the all-trials view also asks the master, once typing
   * pauses. */
  private _onSearch(text: string): void {
    this._search = text;
    this.renderLines();
    if (this._allTrials) {
      window.clearTimeout(this._searchTimer);
      // The controls stay (the caret with them); only the lines are loaded again.
      this._searchTimer = window.setTimeout(
        () => void this.selectAllTrials(false),
        SEARCH_DELAY_MS
      );
    }
  }

  dispose(): void {
    window.clearTimeout(this._searchTimer);
    this._unsubscribe?.();
    this._unsubscribe = null;
  }

  private _updateSubscription(): void {
    const want = this._shown && this._follow && (this._trialId !== null || this._allTrials);
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

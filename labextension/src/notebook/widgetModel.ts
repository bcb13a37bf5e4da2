/**
 * What the notebook widget (notebookWidget.ts) decides without a DOM: the bounded log tail and
 * the lines of its error banner. Plain functions and classes, so the unit tests drive them.
 */
import type { IExperiment, ILogLine, IMetricReport, ITrial } from '../api/types';
import { cutLine } from '../model/notebookErrors';
import {
  LOG_LINE_MAX_CHARS,
  LOG_TAIL_LINES,
  LOG_TAIL_TRIALS,
  NOTEBOOK_ERROR_MARKER
} from '../api/contract.generated';

/**
 * Log lines shown under the widget (of the newest trials), how long one may be, and the line a
 * failing notebook trial prints for the master: jupyter_determined/_contract.py defines them.
 */
export { LOG_LINE_MAX_CHARS, LOG_TAIL_LINES, LOG_TAIL_TRIALS, NOTEBOOK_ERROR_MARKER };
// The banner's lines moved to the model layer (the experiment tab shows the banner too).
export {
  cellName,
  cutLine,
  errorBannerLines,
  errorLocation,
  ordinal,
  type IBannerLine,
  type INotebookError,
  type TrialWithErrors
} from '../model/notebookErrors';

/** What the kernel puts in the output. */
export interface IExperimentOutputData {
  experiment_id: number;
  snapshot?: {
    experiment?: IExperiment;
    trials?: ITrial[];
    metrics?: IMetricReport[];
    logs?: ILogLine[];
    taken_at?: string | null;
  };
}

/**
 * A bounded tail of log lines from several polls: no duplicates (by id), at most `max` lines,
 * and a note of how many lines went by unseen between two polls (a flood is summarised, not
 * shipped to the browser).
 */
export class LogTail {
  private _entries: (
    { kind: 'line'; line: ILogLine } | { kind: 'skipped'; count: number; trialId: number }
  )[] = [];
  private _lastId = new Map<number, number>();

  constructor(readonly max = LOG_TAIL_LINES) {}

  /** Add the latest lines of one trial (ascending ids); returns whether anything changed. */
  add(trialId: number, lines: ILogLine[]): boolean {
    const last = this._lastId.get(trialId);
    // The notebook-error marker is for machines (the banner shows it); the Logs tab keeps it.
    const fresh = lines.filter(
      line => (last === undefined || line.id > last) && !line.line.startsWith(NOTEBOOK_ERROR_MARKER)
    );
    if (!fresh.length) {
      return false;
    }
    // Ids of one trial's lines are not contiguous (other trials log in between), so a gap in
    // ids is no proof of skipped lines; the tail request asked for the last N, and a full
    // answer whose first line is newer than anything seen means lines went by unseen.
    let shown = fresh;
    if (last !== undefined && fresh.length === lines.length && lines.length >= this.max) {
      // The note goes first and stays inside the bound: it is what the user must not miss.
      this._entries.push({ kind: 'skipped', count: -1, trialId });
      shown = fresh.slice(fresh.length - (this.max - 1));
    }
    for (const line of shown) {
      this._entries.push({ kind: 'line', line });
    }
    this._lastId.set(trialId, fresh[fresh.length - 1].id);
    if (this._entries.length > this.max) {
      this._entries = this._entries.slice(this._entries.length - this.max);
    }
    return true;
  }

  /** The lines to show, oldest first. */
  text(): string[] {
    return this._entries.map(entry =>
      entry.kind === 'line'
        ? `[trial ${entry.line.trial_id}] ${cutLine(entry.line.line)}`
        : `[trial ${entry.trialId}] … more lines not shown (see Logs)`
    );
  }
}

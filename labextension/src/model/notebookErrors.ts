/**
 * Where a failed notebook trial's error is in the notebook, as a person finds it there: the
 * lines of the error banner (views/errorBanner.ts) the widget and the experiment tab share.
 * Plain functions, so the unit tests drive them.
 */
import type { ITrial } from '../api/types';
import { LOG_LINE_MAX_CHARS } from '../api/contract.generated';

/** Where a failing notebook trial's error came from (the master's `notebook_error`). */
export interface INotebookError {
  notebook?: string | null;
  cell_id?: string | null;
  cell_index?: number | null;
  line?: number | null;
  exception?: string | null;
  /** The cell's prompt number (`[7]`) when the notebook was submitted; null: it had not run. */
  execution_count?: number | null;
  /** 1-based among the notebook's code cells (names a cell that had not run). */
  code_number?: number | null;
  /** The cell's first line as the notebook shows it. */
  first_line?: string | null;
}

export type TrialWithErrors = ITrial & {
  notebook_error?: INotebookError | null;
  exit_summary?: string | null;
};

/** One log line as shown: long lines cut, with how much was cut. */
export function cutLine(text: string, limit = LOG_LINE_MAX_CHARS): string {
  const line = text.replace(/\n+$/, '');
  if (line.length <= limit) {
    return line;
  }
  return `${line.slice(0, limit)}… (${(line.length - limit).toLocaleString('en-US')} more characters)`;
}

/** One line of the error banner: a failed trial (or -1: the experiment). */
export interface IBannerLine {
  trialId: number;
  text: string;
  cellId: string | null;
  /** Where the error is in the notebook (Go to cell); null when it names no cell. */
  error: INotebookError | null;
}

/** `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`. */
export function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/**
 * The cell as the notebook shows it: its prompt `[7]` (the execution count when the notebook
 * was submitted), else `the 4th code cell` (it had not run), else by position or id.
 */
export function cellName(error: INotebookError): string {
  if (typeof error.execution_count === 'number') {
    return `[${error.execution_count}]`;
  }
  if (typeof error.code_number === 'number') {
    return `the ${ordinal(error.code_number)} code cell`;
  }
  if (typeof error.cell_index === 'number') {
    return `cell ${error.cell_index + 1}`;
  }
  return error.cell_id ? `cell ${error.cell_id}` : 'a notebook cell';
}

/** `[7], line 3 of the cell `model = build(...)`` (what a person finds in the notebook). */
export function errorLocation(error: INotebookError): string {
  const line = typeof error.line === 'number' ? `, line ${error.line}` : '';
  const first = error.first_line ? ` of the cell \`${cutLine(error.first_line, 80)}\`` : '';
  return `${cellName(error)}${line}${first}`;
}

/** The banner lines for failed trials: where in the notebook, and why. */
export function errorBannerLines(trials: Iterable<TrialWithErrors>): IBannerLine[] {
  const lines: IBannerLine[] = [];
  for (const trial of trials) {
    const error = trial.notebook_error;
    if (trial.state !== 'ERROR' && !error) {
      continue;
    }
    let text = `Trial ${trial.id} failed`;
    let cellId: string | null = null;
    if (error) {
      text += ` in ${errorLocation(error)}`;
      if (error.exception) {
        text += `: ${cutLine(error.exception, 300)}`;
      }
      cellId = error.cell_id ?? null;
    } else if (trial.exit_summary) {
      text += `: ${trial.exit_summary}`;
    }
    lines.push({ trialId: trial.id, text, cellId, error: error ?? null });
  }
  return lines;
}

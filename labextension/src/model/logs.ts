/** Log lines: levels, filters and the text a line shows. */
import { formatStartTime } from './format';
import type { ILogLine } from '../api/types';

export const LOG_LEVELS = ['DEBUG', 'INFO', 'WARNING', 'ERROR'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const LEVEL_PATTERN = /\b(DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)\b/;

/**
 * The level of a log line, from the usual `LEVEL` word in it (Python logging, the harness's
 * LOG_FORMAT); a line without one is INFO on stdout and WARNING on stderr... unless it is a
 * traceback, which reads as ERROR.
 */
export function logLevel(line: Pick<ILogLine, 'line' | 'stream'>): LogLevel {
  const match = LEVEL_PATTERN.exec(line.line.slice(0, 200));
  if (match) {
    const word = match[1];
    if (word === 'WARN' || word === 'WARNING') {
      return 'WARNING';
    }
    if (word === 'CRITICAL' || word === 'FATAL' || word === 'ERROR') {
      return 'ERROR';
    }
    return word as LogLevel;
  }
  if (line.line.startsWith('Traceback (most recent call last)')) {
    return 'ERROR';
  }
  return line.stream === 'stderr' ? 'WARNING' : 'INFO';
}

export interface ILogFilter {
  /** A rank, or null for all ranks. */
  rank: number | null;
  /** The lowest level shown. */
  minLevel: LogLevel;
  /** Only lines containing this text (any case); empty or absent: every line. */
  search?: string;
}

/** The lines that pass the rank and level filter, in order. */
export function filterLogs(lines: Iterable<ILogLine>, filter: ILogFilter): ILogLine[] {
  const floor = LOG_LEVELS.indexOf(filter.minLevel);
  const search = (filter.search ?? '').trim().toLowerCase();
  const kept: ILogLine[] = [];
  for (const line of lines) {
    if (filter.rank !== null && line.rank !== filter.rank) {
      continue;
    }
    if (search && !line.line.toLowerCase().includes(search)) {
      continue;
    }
    if (LOG_LEVELS.indexOf(logLevel(line)) < floor) {
      continue;
    }
    kept.push(line);
  }
  return kept;
}

/** One log line as the viewer prints it: `[rank 0] 01:02:03 text`; with `withTrial` (the
 * all-trials view) the trial first: `[trial 3] [rank 0] 01:02:03 text`. */
export function formatLogLine(line: ILogLine, withTrial = false): string {
  const time = formatStartTime(line.time, new Date(line.time));
  const rank = line.rank === null || line.rank === undefined ? '' : `[rank ${line.rank}] `;
  const trial = withTrial ? `[trial ${line.trial_id}] ` : '';
  return `${trial}${rank}${time} ${line.line}`;
}

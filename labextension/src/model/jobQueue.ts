/**
 * The sidebar Queue view's pure decisions: the queue grouped per resource pool in queue order,
 * who may change a job, which update "move up" / "move down" sends, and the checks of a typed
 * priority or weight (with the words the view shows when they are wrong).
 */
import type { IJob, IQueueUser, JobQueueUpdate } from '../api/jobQueue';

export type { IJob, IQueueUser, JobQueueUpdate };

/** What the Queue view says when no job waits or runs. */
export const EMPTY_QUEUE_TEXT = 'The queue is empty.';
export const EMPTY_QUEUE_HINT =
  'Active experiments appear here while their trials wait for slots or hold them; finished ones leave.';

/** One resource pool's part of the queue, position 1 first. */
export interface IPoolQueue {
  pool: string;
  jobs: IJob[];
}

/** The jobs per pool (pools by name, the default first when named ''), each in queue order. */
export function groupByPool(jobs: readonly IJob[]): IPoolQueue[] {
  const pools = new Map<string, IJob[]>();
  for (const job of jobs) {
    const pool = job.resourcePool ?? '';
    let list = pools.get(pool);
    if (!list) {
      list = [];
      pools.set(pool, list);
    }
    list.push(job);
  }
  return [...pools.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([pool, list]) => ({
      pool,
      // Stable: jobs the master ranked the same keep its order.
      jobs: list
        .map((job, index) => ({ job, index }))
        .sort((a, b) => (a.job.position ?? 0) - (b.job.position ?? 0) || a.index - b.index)
        .map(entry => entry.job)
    }));
}

/**
 * Whether the signed-in user may change the job: its owner or an admin. Unknown user (GET /me
 * failed): offer the actions and let the master answer (a 403 is shown as it says).
 */
export function canChange(
  job: Pick<IJob, 'userId' | 'username'>,
  user: IQueueUser | null
): boolean {
  if (!user) {
    return true;
  }
  if (user.admin) {
    return true;
  }
  if (Number.isFinite(user.id) && typeof job.userId === 'number') {
    return job.userId === user.id;
  }
  return job.username === user.username;
}

/**
 * The update that moves a job one place up (ahead of the job before it) or down (behind the
 * job after it) in its pool; null at the top or bottom, or when the job is not in the list.
 */
export function moveUpdate(
  poolJobs: readonly IJob[],
  jobId: string,
  direction: 'up' | 'down'
): JobQueueUpdate | null {
  const index = poolJobs.findIndex(job => job.jobId === jobId);
  if (index < 0) {
    return null;
  }
  if (direction === 'up') {
    return index > 0 ? { jobId, aheadOf: poolJobs[index - 1].jobId } : null;
  }
  return index < poolJobs.length - 1 ? { jobId, behindOf: poolJobs[index + 1].jobId } : null;
}

/** The job as `det job list` names it: `name (id)`. */
export function jobLabel(job: Pick<IJob, 'name' | 'jobId'>): string {
  return job.name ? `${job.name} (${job.jobId})` : job.jobId;
}

/** Queued or Scheduled (Determined's words), from the job's summary. */
export function jobStateText(job: Pick<IJob, 'summary'>): string {
  const state: string = job.summary?.state ?? '';
  if (state === 'STATE_SCHEDULED') {
    return 'Scheduled';
  }
  if (state === 'STATE_QUEUED') {
    return 'Queued';
  }
  const word = state.replace(/^STATE_/, '').toLowerCase();
  return word ? word[0].toUpperCase() + word.slice(1) : 'Unknown';
}

/** Slots held / slots needed, as `det job list` shows them. */
export function slotsText(job: Pick<IJob, 'allocatedSlots' | 'requestedSlots'>): string {
  return `${job.allocatedSlots ?? 0}/${job.requestedSlots ?? 0}`;
}

/** A weight as a person reads it (no trailing zeros). */
export function weightText(weight: number): string {
  return Number.isInteger(weight) ? String(weight) : String(Number(weight.toPrecision(4)));
}

/** A typed value checked: the number, or the words that say what to type instead. */
export type Parsed = { value: number; error?: undefined } | { value?: undefined; error: string };

/** A priority: an integer from 1 to 99 (smaller is more important), as the master requires. */
export function parsePriority(text: string): Parsed {
  const trimmed = text.trim();
  const value = Number(trimmed);
  if (!trimmed || !Number.isInteger(value) || value < 1 || value > 99) {
    return {
      error: `priority: type a whole number from 1 to 99 (smaller runs first), not “${trimmed}”`
    };
  }
  return { value };
}

/** A weight: a number above 0 (its share of the user's slots under fair share), as the
 * job queue API requires. */
export function parseWeight(text: string): Parsed {
  const trimmed = text.trim();
  const value = Number(trimmed);
  if (!trimmed || !Number.isFinite(value) || value <= 0) {
    return { error: `weight: type a number above 0 (e.g. 2 or 0.5), not “${trimmed}”` };
  }
  return { value };
}

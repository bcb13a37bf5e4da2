/**
 * The job queue of the REST API (Determined's `GET/POST /api/v1/job-queues`, docs/rest-api.md):
 * each ACTIVE experiment that waits for slots or holds them is a job, in queue order per
 * resource pool; owners and admins reorder it (priority, weight, ahead of / behind a job).
 */
import type { DeterminedClient } from './client';
import type { ApiJob } from './contract.generated';

/**
 * A job of the queue (Determined's `jobv1.Job`, plus `position` and `waitReason`): the fields
 * the master always serves for an experiment's job are required here.
 */
export interface IJob extends ApiJob {
  username: string;
  userId: number;
  /** 1–99, smaller is more important. */
  priority: number;
  weight: number;
  requestedSlots: number;
  allocatedSlots: number;
}

/** One change of the queue (Determined's QueueControl): exactly one action per update. */
export type JobQueueUpdate =
  | { jobId: string; priority: number }
  | { jobId: string; weight: number }
  | { jobId: string; aheadOf: string }
  | { jobId: string; behindOf: string }
  | { jobId: string; resourcePool: string };

/** The signed-in user, as far as the queue needs them (GET /me). */
export interface IQueueUser {
  id: number;
  username: string;
  admin: boolean;
}

/** Jobs per request: the queue is read whole, a page at a time. */
export const JOB_PAGE = 200;
/** More than this many pages is a master that ignores `offset`: stop rather than loop. */
const MAX_PAGES = 50;

/** Every job of the queue (of one pool when given), in queue order. */
export async function listJobQueue(client: DeterminedClient, resourcePool = ''): Promise<IJob[]> {
  const jobs: IJob[] = [];
  for (let page = 0; page < MAX_PAGES; page++) {
    const answer = await client.request<{
      jobs?: IJob[];
      pagination?: { total?: number };
    }>('GET', 'job-queues', {
      query: { resourcePool, offset: jobs.length, limit: JOB_PAGE }
    });
    const got = answer.jobs ?? [];
    jobs.push(...got);
    const total = answer.pagination?.total;
    if (got.length < JOB_PAGE || (typeof total === 'number' && jobs.length >= total)) {
      break;
    }
  }
  return jobs;
}

/** Apply queue changes (all or none: a 403/404/400 names the job and changes nothing). */
export async function updateJobQueue(
  client: DeterminedClient,
  updates: JobQueueUpdate[]
): Promise<void> {
  await client.request<unknown>('POST', 'job-queues', { body: { updates } });
}

/** Who is signed in (to offer the actions only on jobs they may change). */
export async function queueUser(client: DeterminedClient): Promise<IQueueUser> {
  const answer = await client.request<{ user: Partial<IQueueUser> }>('GET', 'me');
  const user = answer.user ?? {};
  return {
    id: Number(user.id),
    username: String(user.username ?? ''),
    admin: Boolean(user.admin)
  };
}

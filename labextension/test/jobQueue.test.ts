/**
 * Unit tests of the sidebar Queue view: the REST client of `/job-queues` (pages, the update
 * body, the master's refusal kept as its words), and the view's pure decisions (queue order
 * per pool, who may change a job, the move-up/move-down update, the checks of typed values).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ServerConnection } from '@jupyterlab/services';

import { DeterminedApiError, DeterminedClient, describeError } from '../src/api/client';
import { IJob, JOB_PAGE, listJobQueue, queueUser, updateJobQueue } from '../src/api/jobQueue';
import {
  canChange,
  groupByPool,
  jobLabel,
  jobStateText,
  moveUpdate,
  parsePriority,
  parseWeight,
  slotsText,
  weightText
} from '../src/model/jobQueue';

interface IRecorded {
  method: string;
  url: string;
  body: unknown;
}

/** A client whose requests are recorded and answered by `answer(request)`. */
function fakeClient(answer: (request: IRecorded) => { status?: number; body: unknown }): {
  client: DeterminedClient;
  requests: IRecorded[];
} {
  const requests: IRecorded[] = [];
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://lab.test/',
    token: '',
    fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
      const request = input instanceof Request ? input : null;
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      const method = init?.method ?? request?.method ?? 'GET';
      const text = init?.body ? String(init.body) : request ? await request.clone().text() : '';
      const recorded = { method, url, body: text ? JSON.parse(text) : undefined };
      requests.push(recorded);
      const { status = 200, body } = answer(recorded);
      return new Response(JSON.stringify(body), { status });
    }
  });
  return { client: new DeterminedClient(settings), requests };
}

/** The query the client chose (ServerConnection adds a numeric cache-buster to GETs). */
function query(url: string): Record<string, string> {
  return Object.fromEntries(
    [...new URL(url).searchParams.entries()].filter(([key]) => !/^\d+$/.test(key))
  );
}

function job(id: number, position: number, overrides: Partial<IJob> = {}): IJob {
  return {
    jobId: `exp-${id}`,
    type: 'TYPE_EXPERIMENT',
    entityId: String(id),
    name: `search-${id}`,
    username: 'alice',
    userId: 2,
    resourcePool: 'default',
    priority: 42,
    weight: 1,
    requestedSlots: 2,
    allocatedSlots: 0,
    submissionTime: '2026-11-28T12:00:00Z',
    summary: { state: 'STATE_QUEUED', jobsAhead: position - 1 },
    position,
    waitReason: null,
    ...overrides
  };
}

describe('the job-queue client', () => {
  test('reads the whole queue a page at a time, in the order the master gives', async () => {
    const all = Array.from({ length: JOB_PAGE + 3 }, (_, i) => job(i + 1, i + 1));
    const { client, requests } = fakeClient(({ url }) => {
      const { offset, limit } = query(url);
      const page = all.slice(Number(offset), Number(offset) + Number(limit));
      return { body: { jobs: page, pagination: { total: all.length } } };
    });
    const jobs = await listJobQueue(client);
    assert.deepEqual(
      jobs.map(j => j.jobId),
      all.map(j => j.jobId)
    );
    assert.equal(requests.length, 2);
    assert.equal(new URL(requests[0].url).pathname, '/determined/api/v1/job-queues');
    assert.deepEqual(query(requests[0].url), { offset: '0', limit: String(JOB_PAGE) });
    assert.deepEqual(query(requests[1].url), {
      offset: String(JOB_PAGE),
      limit: String(JOB_PAGE)
    });
  });

  test('asks for one pool when given', async () => {
    const { client, requests } = fakeClient(() => ({ body: { jobs: [], pagination: {} } }));
    assert.deepEqual(await listJobQueue(client, 'gpu'), []);
    assert.equal(query(requests[0].url).resourcePool, 'gpu');
  });

  test('sends Determined’s QueueControl body, one action per update', async () => {
    const { client, requests } = fakeClient(() => ({ body: {} }));
    await updateJobQueue(client, [{ jobId: 'exp-3', aheadOf: 'exp-5' }]);
    assert.equal(requests[0].method, 'POST');
    assert.equal(new URL(requests[0].url).pathname, '/determined/api/v1/job-queues');
    assert.deepEqual(requests[0].body, { updates: [{ jobId: 'exp-3', aheadOf: 'exp-5' }] });
  });

  test('a refused change is the master’s message, with its status', async () => {
    const { client } = fakeClient(() => ({
      status: 403,
      body: { message: 'experiment 3 belongs to alice: only alice or an admin may update it' }
    }));
    await assert.rejects(
      updateJobQueue(client, [{ jobId: 'exp-3', priority: 10 }]),
      (error: unknown) =>
        error instanceof DeterminedApiError &&
        error.status === 403 &&
        describeError(error) ===
          'experiment 3 belongs to alice: only alice or an admin may update it'
    );
  });

  test('the signed-in user comes from GET /me', async () => {
    const { client, requests } = fakeClient(() => ({
      body: { user: { id: 4, username: 'bob', admin: false, active: true } }
    }));
    assert.deepEqual(await queueUser(client), { id: 4, username: 'bob', admin: false });
    assert.equal(new URL(requests[0].url).pathname, '/determined/api/v1/me');
  });
});

describe('the queue per pool', () => {
  test('groups by pool and orders by position whatever order the jobs came in', () => {
    const pools = groupByPool([
      job(3, 2),
      job(9, 1, { resourcePool: 'gpu' }),
      job(1, 1),
      job(5, 3)
    ]);
    assert.deepEqual(
      pools.map(p => [p.pool, p.jobs.map(j => j.jobId)]),
      [
        ['default', ['exp-1', 'exp-3', 'exp-5']],
        ['gpu', ['exp-9']]
      ]
    );
    assert.deepEqual(groupByPool([]), []);
  });

  test('move up goes ahead of the job before; move down behind the job after', () => {
    const queue = [job(1, 1), job(3, 2), job(5, 3)];
    assert.deepEqual(moveUpdate(queue, 'exp-3', 'up'), { jobId: 'exp-3', aheadOf: 'exp-1' });
    assert.deepEqual(moveUpdate(queue, 'exp-3', 'down'), { jobId: 'exp-3', behindOf: 'exp-5' });
    assert.equal(moveUpdate(queue, 'exp-1', 'up'), null, 'first: nothing ahead');
    assert.equal(moveUpdate(queue, 'exp-5', 'down'), null, 'last: nothing behind');
    assert.equal(moveUpdate(queue, 'exp-7', 'up'), null, 'not in this pool');
  });

  test('the owner and admins may change a job; others may not', () => {
    const alices = job(1, 1);
    assert.equal(canChange(alices, { id: 2, username: 'alice', admin: false }), true);
    assert.equal(canChange(alices, { id: 4, username: 'bob', admin: false }), false);
    assert.equal(canChange(alices, { id: 1, username: 'admin', admin: true }), true);
    // Unknown user (GET /me failed): offered, and the master's 403 says no.
    assert.equal(canChange(alices, null), true);
  });

  test('rows read as det job list reads them', () => {
    const running = job(3, 1, {
      allocatedSlots: 2,
      summary: { state: 'STATE_SCHEDULED', jobsAhead: 0 }
    });
    assert.equal(jobLabel(running), 'search-3 (exp-3)');
    assert.equal(jobLabel({ name: '', jobId: 'exp-4' }), 'exp-4');
    assert.equal(slotsText(running), '2/2');
    assert.equal(jobStateText(running), 'Scheduled');
    assert.equal(jobStateText(job(4, 2)), 'Queued');
    assert.equal(weightText(1), '1');
    assert.equal(weightText(0.333333), '0.3333');
  });
});

describe('typed values', () => {
  test('a priority is a whole number from 1 to 99', () => {
    assert.deepEqual(parsePriority(' 10 '), { value: 10 });
    for (const bad of ['', '0', '100', '2.5', 'high']) {
      const parsed = parsePriority(bad);
      assert.equal(parsed.value, undefined, bad);
      assert.match(parsed.error ?? '', /priority: type a whole number from 1 to 99/);
    }
  });

  test('a weight is a number above 0', () => {
    assert.deepEqual(parseWeight('0.5'), { value: 0.5 });
    assert.deepEqual(parseWeight(' 2 '), { value: 2 });
    for (const bad of ['', '0', '-1', 'x', 'Infinity']) {
      assert.match(parseWeight(bad).error ?? '', /weight: type a number above 0/, bad);
    }
  });
});

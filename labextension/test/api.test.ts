/**
 * Unit tests of the API client's bounded reads: the query each one sends.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ServerConnection } from '@jupyterlab/services';

import { DeterminedApiError, DeterminedClient, isMasterStopping } from '../src/api/client';

/** A client whose requests are recorded and answered with `answer`. */
function recordingClient(answer: unknown): { client: DeterminedClient; urls: string[] } {
  const urls: string[] = [];
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://lab.test/',
    token: '',
    fetch: async (input: RequestInfo | URL) => {
      urls.push(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
      return new Response(JSON.stringify(answer), { status: 200 });
    }
  });
  return { client: new DeterminedClient(settings), urls };
}

/** The query the client chose (ServerConnection adds a numeric cache-buster to GETs). */
function query(url: string): Record<string, string> {
  return Object.fromEntries(
    [...new URL(url).searchParams.entries()].filter(([key]) => !/^\d+$/.test(key))
  );
}

describe('experimentMetrics', () => {
  test('asks for the given trials, downsampled', async () => {
    const { client, urls } = recordingClient({ metrics: [{ id: 1 }] });
    const metrics = await client.experimentMetrics(7, 'validation', 12, {
      trialIds: [3, 5],
      maxDatapoints: 500
    });
    assert.deepEqual(metrics, [{ id: 1 }]);
    assert.equal(new URL(urls[0]).pathname, '/determined/api/v1/experiments/7/metrics');
    assert.deepEqual(query(urls[0]), {
      group: 'validation',
      after_id: '12',
      trial_ids: '3,5',
      max_datapoints: '500'
    });
  });

  test('without options it asks for everything, as before', async () => {
    const { client, urls } = recordingClient({ metrics: [] });
    await client.experimentMetrics(7);
    assert.deepEqual(query(urls[0]), { after_id: '0' });
  });

  test('no trial asked for sends no request (an empty trial_ids would mean every trial)', async () => {
    const { client, urls } = recordingClient({ metrics: [{ id: 1 }] });
    assert.deepEqual(
      await client.experimentMetrics(7, '', 0, { trialIds: [], maxDatapoints: 10 }),
      []
    );
    assert.equal(urls.length, 0);
  });
});

describe('trialsPage', () => {
  test('sends limit, offset and order_by and returns the total', async () => {
    const { client, urls } = recordingClient({ trials: [], total: 40 });
    const page = await client.trialsPage(7, { limit: 20, offset: 20, orderBy: 'best' });
    assert.equal(page.total, 40);
    assert.equal(new URL(urls[0]).pathname, '/determined/api/v1/experiments/7/trials');
    assert.deepEqual(query(urls[0]), { limit: '20', offset: '20', order_by: 'best' });
  });
});

describe('the master stopping', () => {
  test('its 503 is recognised (one note), other failures are not', () => {
    const stopping = new DeterminedApiError(
      'the master is stopping: its runs were asked to checkpoint and exit; start the master again',
      503
    );
    assert.equal(isMasterStopping(stopping), true);
    assert.equal(isMasterStopping(new DeterminedApiError('numpy is missing', 503)), false);
    assert.equal(isMasterStopping(new DeterminedApiError('the master is stopping', 500)), false);
    assert.equal(isMasterStopping(new Error('the master is stopping')), false);
  });
});

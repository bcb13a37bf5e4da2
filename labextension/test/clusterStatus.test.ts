/**
 * Unit tests of what the cluster strip says about the master's Ray cluster.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { IClusterStatus } from '../src/api/types';
import { clusterNotice } from '../src/model/clusterStatus';

function status(state: IClusterStatus['state'], message: string, alive: boolean[]): IClusterStatus {
  return {
    resource_manager: 'ray',
    state,
    message,
    since: '2026-11-28T12:00:00+00:00',
    address: '10.0.0.1:6379',
    nodes: alive.map((a, i) => ({
      node_id: `n${i}`,
      address: `10.0.0.${i}`,
      alive: a,
      pool: 'default',
      gpus: 1,
      cpus: 4
    }))
  };
}

describe('cluster notice', () => {
  test('a local master says nothing', () => {
    assert.equal(clusterNotice(undefined), null);
  });

  test('a master waiting for Ray says so in its own words', () => {
    const message = 'waiting for the Ray cluster at 10.0.0.1:6379: nothing answers';
    assert.deepEqual(clusterNotice(status('waiting', message, [])), {
      kind: 'warning',
      text: `Ray: ${message}`
    });
  });

  test('a connected master counts the alive nodes', () => {
    assert.deepEqual(clusterNotice(status('connected', 'connected', [true, false, true])), {
      kind: 'info',
      text: 'Ray cluster: 2 nodes'
    });
  });
});

/**
 * Unit tests of what states, progress and numbers look like, and of the trial comparison.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { comparisonRows } from '../src/views/compare';
import { formatMetric, formatNumber } from '../src/model/format';
import {
  allowedActions,
  displayProgress,
  experimentDisplayState,
  kernelConsoleAction,
  listDisplayState,
  runCounts,
  stateCategory,
  stopReasonText,
  trialDisplayState,
  trialExitNote,
  trialWaitNote
} from '../src/model/states';
import { bulkAllowed } from '../src/model/experimentTable';
import { bestTrialId, defaultPlottedTrials, sortTrials } from '../src/model/trialTable';
import type { ITrial } from '../src/api/types';

function trial(id: number, overrides: Partial<ITrial> = {}): ITrial {
  return {
    id,
    experiment_id: 1,
    state: 'ACTIVE',
    hparams: {},
    restarts: 0,
    steps_completed: 0,
    start_time: '2026-11-22T01:00:00.000Z',
    end_time: null,
    ...overrides
  };
}

describe('states', () => {
  test('a trial says why it waits or is being preempted, in words shown under its state', () => {
    const quota = 'waiting: ann is at their 2-slot quota';
    assert.equal(trialWaitNote(trial(1, { run_state: 'QUEUED', wait_reason: quota })), quota);
    assert.equal(trialWaitNote(trial(1, { run_state: 'QUEUED' })), '', 'no reason given');
    assert.equal(
      trialWaitNote(trial(1, { run_state: 'STOPPING', stop_reason: 'rebalance' })),
      'Preempted: the scheduler gave its slots to another job; it resumes from its checkpoint'
    );
    assert.equal(
      trialWaitNote(trial(1, { state: 'PAUSED', run_state: 'STOPPING', stop_reason: 'pause' })),
      'Stopping: user pause'
    );
    assert.equal(trialWaitNote(trial(1, { run_state: 'RUNNING', wait_reason: null })), '');
    // A stale wait reason never outlives the wait.
    assert.equal(trialWaitNote(trial(1, { state: 'COMPLETED', wait_reason: quota })), '');
  });

  test('an active trial waiting for slots shows QUEUED', () => {
    assert.equal(trialDisplayState(trial(1, { run_state: 'QUEUED' })), 'QUEUED');
    assert.equal(trialDisplayState(trial(1, { run_state: 'RUNNING' })), 'ACTIVE');
    assert.equal(trialDisplayState(trial(1, { run_state: null })), 'ACTIVE');
    assert.equal(trialDisplayState(trial(1)), 'ACTIVE', 'a master without run_state');
    // A stale run_state never hides a final state.
    assert.equal(
      trialDisplayState(trial(1, { state: 'COMPLETED', run_state: 'QUEUED' })),
      'COMPLETED'
    );
    assert.equal(stateCategory('QUEUED'), 'queued');
  });

  test('running and queued trials are counted apart', () => {
    const trials = [
      trial(1, { run_state: 'RUNNING' }),
      trial(2, { run_state: 'QUEUED' }),
      trial(3, { run_state: 'QUEUED' }),
      trial(4, { state: 'COMPLETED' })
    ];
    assert.deepEqual(runCounts(trials), {
      running: 1,
      queued: 2,
      stopping: 0,
      stopReason: null
    });
  });

  test('a paused trial whose run has not exited yet shows PAUSING, with its reason', () => {
    const pausing = trial(1, { state: 'PAUSED', run_state: 'STOPPING', stop_reason: 'pause' });
    assert.equal(trialDisplayState(pausing), 'PAUSING');
    assert.equal(stateCategory('PAUSING'), 'stopping');
    assert.equal(trialDisplayState(trial(2, { state: 'PAUSED', run_state: null })), 'PAUSED');
    // The master stopping leaves trials ACTIVE (they resume on the next start).
    const shutdown = trial(3, { run_state: 'STOPPING', stop_reason: 'master-stop' });
    assert.equal(trialDisplayState(shutdown), 'PAUSING');
    const counts = runCounts([pausing, trial(4, { run_state: 'RUNNING' })]);
    assert.deepEqual(counts, { running: 1, queued: 0, stopping: 1, stopReason: 'pause' });
    assert.equal(experimentDisplayState('PAUSED', counts), 'PAUSING');
    assert.equal(stopReasonText(counts.stopReason), 'user pause');
    assert.equal(stopReasonText('master-stop'), 'master stopping');
    assert.match(stopReasonText('rebalance'), /scheduler gave its slots to another job/);
    // Once every run exited, the experiment is PAUSED.
    const exited = runCounts([trial(2, { state: 'PAUSED', run_state: null })]);
    assert.equal(experimentDisplayState('PAUSED', exited), 'PAUSED');
  });

  test('the table shows PAUSING and offers neither Pause nor Activate until the runs exit', () => {
    // The master's list says so (run_state STOPPING): the table has no trials to count.
    const pausing = { state: 'PAUSED', archived: false, run_state: 'STOPPING' as const };
    assert.equal(listDisplayState(pausing), 'PAUSING');
    assert.deepEqual([...allowedActions(pausing)], ['kill']);
    assert.equal(bulkAllowed(pausing, 'activate'), false);
    assert.equal(bulkAllowed(pausing, 'kill'), true);
    // The master stopping: an ACTIVE experiment whose runs drain cannot be paused either.
    const draining = { state: 'ACTIVE', archived: false, run_state: 'STOPPING' as const };
    assert.equal(listDisplayState(draining), 'PAUSING');
    assert.equal(bulkAllowed(draining, 'pause'), false);
    // The experiment tab counts its trials' stopping runs (a stale experiment JSON too).
    const paused = { state: 'PAUSED', archived: false, run_state: null };
    assert.deepEqual([...allowedActions(paused, 1)], ['kill']);
    // Once the runs exited: PAUSED, and Activate is back.
    assert.equal(listDisplayState(paused), 'PAUSED');
    assert.deepEqual([...allowedActions(paused)].sort(), ['activate', 'kill']);
  });

  test('sorting by state puts queued trials together', () => {
    const trials = [
      trial(1, { run_state: 'QUEUED' }),
      trial(2, { run_state: 'RUNNING' }),
      trial(3, { run_state: 'QUEUED' })
    ];
    assert.deepEqual(
      sortTrials(trials, 'state', true, 'loss').map(t => t.id),
      [2, 1, 3]
    );
  });

  test('why a trial ended is shown for ERROR and CANCELED only', () => {
    const summary = 'killed by SIGKILL: the user killed the experiment';
    assert.equal(trialExitNote(trial(1, { state: 'CANCELED', exit_summary: summary })), summary);
    assert.equal(
      trialExitNote(trial(1, { state: 'ERROR', exit_summary: null, exit_code: 3 })),
      'exited with code 3'
    );
    assert.equal(trialExitNote(trial(1, { state: 'COMPLETED', exit_summary: summary })), '');
    assert.equal(trialExitNote(trial(1, { state: 'CANCELED' })), '');
  });
});

describe('progress', () => {
  test('COMPLETED is 100 % whatever the last report said', () => {
    assert.equal(displayProgress('COMPLETED', 0.75), 1);
    assert.equal(displayProgress('COMPLETED', null), 1);
  });

  test('other states show what was reported, clamped; nothing reported is null', () => {
    assert.equal(displayProgress('ACTIVE', 0.4), 0.4);
    assert.equal(displayProgress('ERROR', 0.4), 0.4);
    assert.equal(displayProgress('ACTIVE', 1.3), 1);
    assert.equal(displayProgress('ACTIVE', -1), 0);
    assert.equal(displayProgress('ACTIVE', null), null);
    assert.equal(displayProgress('ERROR', Number.NaN), null);
  });
});

describe('numbers for people', () => {
  test('4 significant digits, no float noise, no trailing zeros', () => {
    assert.equal(formatNumber(0.30000000000000004), '0.3');
    assert.equal(formatNumber(0.123456789), '0.1235');
    assert.equal(formatNumber(2.5), '2.5');
    assert.equal(formatNumber(-12.3456), '-12.35');
  });

  test('exponent form for tiny and huge magnitudes', () => {
    assert.equal(formatNumber(0.0001), '1e-4');
    assert.equal(formatNumber(0.000123456), '1.235e-4');
    assert.equal(formatNumber(1234567.8), '1.235e6');
    assert.equal(formatNumber(999999.99), '1e6');
    assert.equal(formatNumber(1.5e-7), '1.5e-7');
  });

  test('integers stay exact; metrics use the same rule', () => {
    assert.equal(formatNumber(123456), '123456');
    assert.equal(formatNumber(0), '0');
    assert.equal(formatMetric(0.00031622776601683794), '3.162e-4');
    assert.equal(formatMetric(0.1 + 0.2), '0.3');
  });
});

describe('best and default trials', () => {
  const trials = [
    trial(1, { searcher_metric: 0.5 }),
    trial(2, { searcher_metric: 0.2 }),
    trial(3, { searcher_metric: 0.9 }),
    trial(4),
    trial(5, { searcher_metric: 0.2 })
  ];

  test('the best trial follows the searcher direction; ties go to the lower id', () => {
    assert.equal(bestTrialId(trials, 'loss', true), 2);
    assert.equal(bestTrialId(trials, 'loss', false), 3);
    assert.equal(bestTrialId([trial(1)], 'loss'), null);
  });

  test('a small search plots every trial, a large one its best (the best always in)', () => {
    assert.deepEqual(defaultPlottedTrials(trials, 'loss', true, 8), [1, 2, 3, 4, 5]);
    assert.deepEqual(defaultPlottedTrials(trials, 'loss', true, 2), [2, 5]);
    assert.deepEqual(defaultPlottedTrials(trials, 'loss', false, 2), [1, 3]);
  });
});

describe('trial comparison', () => {
  const a = trial(1, {
    state: 'COMPLETED',
    hparams: { lr: 0.001, layers: 2 },
    steps_completed: 100,
    start_time: '2026-11-22T01:00:00.000Z',
    end_time: '2026-11-22T01:02:05.000Z',
    best_validation: { steps_completed: 100, metrics: { loss: 0.2 }, report_time: '' },
    latest_validation: {
      steps_completed: 100,
      metrics: { loss: 0.25, accuracy: 0.9 },
      report_time: ''
    }
  });
  const b = trial(2, {
    state: 'ERROR',
    exit_summary: 'exited with code 1',
    hparams: { lr: 0.01, layers: 2 },
    steps_completed: 40,
    best_validation: { steps_completed: 40, metrics: { loss: 0.6 }, report_time: '' },
    latest_validation: {
      steps_completed: 40,
      metrics: { loss: 0.6, accuracy: 0.7 },
      report_time: ''
    }
  });

  test('rows of trial facts, metrics and hyperparameters, differences marked', () => {
    const rows = comparisonRows([a, b], 'loss', true);
    const byLabel = new Map(rows.map(r => [r.label, r]));
    assert.deepEqual(byLabel.get('state')?.cells, ['COMPLETED', 'ERROR']);
    assert.deepEqual(byLabel.get('steps')?.cells, ['100', '40']);
    assert.deepEqual(byLabel.get('duration')?.cells, ['2m 05s', '—']);
    assert.deepEqual(byLabel.get('ended')?.cells, ['—', 'exited with code 1']);
    assert.deepEqual(byLabel.get('best loss')?.cells, ['0.2', '0.6']);
    assert.equal(byLabel.get('best loss')?.bestIndex, 0);
    assert.deepEqual(byLabel.get('latest validation accuracy')?.cells, ['0.9', '0.7']);
    assert.equal(
      byLabel.get('latest validation accuracy')?.bestIndex,
      -1,
      'no direction known for other metrics'
    );
    assert.equal(byLabel.get('lr')?.differs, true);
    assert.equal(byLabel.get('layers')?.differs, false);
    assert.deepEqual(
      rows.map(r => r.section),
      [
        'trial',
        'trial',
        'trial',
        'trial',
        'trial',
        'metric',
        'metric',
        'metric',
        'hparam',
        'hparam'
      ]
    );
  });

  test('larger is better flips the best column', () => {
    const rows = comparisonRows([a, b], 'loss', false);
    assert.equal(rows.find(r => r.label === 'best loss')?.bestIndex, 1);
  });
});

describe('actions of a run in a kernel', () => {
  test('an unmanaged experiment cannot be paused or activated, only killed', () => {
    const live = allowedActions({ state: 'ACTIVE', archived: false, unmanaged: true });
    assert.deepEqual([...live].sort(), ['kill']);
    const managed = allowedActions({ state: 'ACTIVE', archived: false });
    assert.deepEqual([...managed].sort(), ['kill', 'pause']);
    const ended = allowedActions({ state: 'ERROR', archived: false, unmanaged: true });
    assert.deepEqual([...ended], ['archive']);
  });
});

describe('kernel console buttons', () => {
  test('Attach only while the trial runs, Debug only while its failed kernel is kept', () => {
    assert.equal(kernelConsoleAction(trial(1, { run_state: 'RUNNING' })), 'attach');
    // QUEUED: no kernel has started yet.
    assert.equal(kernelConsoleAction(trial(1, { run_state: 'QUEUED' })), null);
    assert.equal(kernelConsoleAction(trial(1, { state: 'ERROR', kernel_kept: true })), 'debug');
    // keep_alive ran out: the kernel is gone.
    assert.equal(kernelConsoleAction(trial(1, { state: 'ERROR', kernel_kept: false })), null);
    assert.equal(kernelConsoleAction(trial(1, { state: 'ERROR' })), null);
    assert.equal(kernelConsoleAction(trial(1, { state: 'COMPLETED' })), null);
    assert.equal(kernelConsoleAction(trial(1, { state: 'PAUSED' })), null);
  });
});

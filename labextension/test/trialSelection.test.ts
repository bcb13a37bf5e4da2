/**
 * Unit tests of the experiment view's trial selection: defaults until the user picks, the cap of
 * "select all", and which metrics are fetched for the curves (each trial from the start once,
 * then only what is newer; a failed fetch is asked again).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { IMetricsSample } from '../src/api/client';
import { ExperimentDataModel } from '../src/model/model';
import {
  DEFAULT_SELECTED_TRIALS,
  MAX_SELECTED_TRIALS,
  TrialSelection
} from '../src/model/trialSelection';
import type { IMetricReport, ITrial } from '../src/api/types';

function trial(id: number): ITrial {
  return {
    id,
    experiment_id: 7,
    state: 'ACTIVE',
    hparams: {},
    restarts: 0,
    steps_completed: 0,
    start_time: '',
    end_time: null
  };
}

interface ICall {
  experimentId: number;
  afterId: number;
  trialIds: number[] | undefined;
  maxDatapoints: number | undefined;
}

/** A client that records what it was asked and answers one report per asked trial. */
class FakeClient {
  calls: ICall[] = [];
  fail = false;
  private _nextId = 100;

  async experimentMetrics(
    experimentId: number,
    _group = '',
    afterId = 0,
    sample: IMetricsSample = {}
  ): Promise<IMetricReport[]> {
    this.calls.push({
      experimentId,
      afterId,
      trialIds: sample.trialIds,
      maxDatapoints: sample.maxDatapoints
    });
    if (this.fail) {
      throw new Error('offline');
    }
    return (sample.trialIds ?? []).map(trialId => ({
      id: this._nextId++,
      trial_id: trialId,
      group: 'training',
      steps_completed: 1,
      metrics: { loss: 1 },
      report_time: ''
    }));
  }
}

function setup(trialCount: number): {
  model: ExperimentDataModel;
  client: FakeClient;
  selection: TrialSelection;
} {
  const model = new ExperimentDataModel(7);
  model.setTrials(Array.from({ length: trialCount }, (_, i) => trial(i + 1)));
  const client = new FakeClient();
  return { model, client, selection: new TrialSelection(model, client) };
}

describe('TrialSelection', () => {
  test('selects every trial of a small search, once', () => {
    const { selection } = setup(3);
    assert.equal(selection.selectDefaults(), true);
    assert.deepEqual(selection.ids(), [1, 2, 3]);
    assert.equal(selection.selectDefaults(), false);
    assert.equal(selection.userSelected, false);
  });

  test('selects at most the default number of a large search', () => {
    const { selection } = setup(DEFAULT_SELECTED_TRIALS + 5);
    selection.selectDefaults();
    assert.equal(selection.ids().length, DEFAULT_SELECTED_TRIALS);
  });

  test("the user's pick is kept: defaults no longer replace it", () => {
    const { model, selection } = setup(3);
    selection.selectDefaults();
    assert.equal(selection.toggle(2), false);
    assert.deepEqual(selection.ids(), [1, 3]);
    model.setTrials([trial(4)]);
    assert.equal(selection.selectDefaults(), false);
    assert.deepEqual(selection.ids(), [1, 3]);
    assert.equal(selection.toggle(4, true), true);
    assert.deepEqual(selection.ids(), [1, 3, 4]);
    assert.equal(selection.userSelected, true);
  });

  test('"select all" takes at most MAX_SELECTED_TRIALS; unknown trials are not listed', () => {
    const { selection } = setup(MAX_SELECTED_TRIALS + 10);
    selection.replace(Array.from({ length: MAX_SELECTED_TRIALS + 10 }, (_, i) => i + 1));
    assert.equal(selection.ids().length, MAX_SELECTED_TRIALS);
    selection.replace([1, 999]);
    assert.deepEqual(selection.ids(), [1]);
  });

  test('curves: fetched from the start once, then only what is newer', async () => {
    const { model, client, selection } = setup(2);
    selection.selectDefaults();
    await selection.loadCurves();
    assert.deepEqual(
      client.calls.map(c => [c.afterId, c.trialIds]),
      [
        [0, [1, 2]],
        [0, []]
      ]
    );
    assert.ok(client.calls.every(c => c.experimentId === 7 && c.maxDatapoints === 1000));
    assert.equal(model.metricsOf('training').size, 2);

    client.calls = [];
    model.setTrials([trial(3)]);
    selection.toggle(3, true);
    const seen = model.lastMetricId;
    assert.ok(seen > 0);
    await selection.loadCurves(true); // the selection grew: only the new trial
    assert.deepEqual(
      client.calls.map(c => [c.afterId, c.trialIds]),
      [
        [0, [3]],
        [seen, []]
      ]
    );

    client.calls = [];
    const latest = model.lastMetricId;
    await selection.loadCurves(); // a refresh: what is newer than everything seen
    assert.deepEqual(
      client.calls.map(c => [c.afterId, c.trialIds]),
      [
        [0, []],
        [latest, [1, 2, 3]]
      ]
    );
  });

  test('curves: a failed first fetch is asked again', async () => {
    const { client, selection } = setup(1);
    selection.selectDefaults();
    client.fail = true;
    await assert.rejects(selection.loadCurves(), /offline/);
    client.fail = false;
    client.calls = [];
    await selection.loadCurves();
    assert.deepEqual(client.calls[0].trialIds, [1]);
    assert.equal(client.calls[0].afterId, 0);
  });
});

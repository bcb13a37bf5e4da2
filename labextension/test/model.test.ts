/**
 * Unit tests of the view models: REST answers and live events merge without duplicates.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ExperimentDataModel, ExperimentListModel, LogBuffer } from '../src/model/model';
import type { IExperiment, ILogLine, IMetricReport, ITrial } from '../src/api/types';

function experiment(id: number, overrides: Partial<IExperiment> = {}): IExperiment {
  return {
    id,
    name: `exp-${id}`,
    state: 'ACTIVE',
    archived: false,
    progress: 0,
    start_time: '2026-11-22T01:02:03Z',
    end_time: null,
    searcher: { name: 'single', metric: 'loss', smaller_is_better: true },
    num_trials: 0,
    best_validation: null,
    ...overrides
  };
}

function trial(id: number, experimentId = 7): ITrial {
  return {
    id,
    experiment_id: experimentId,
    state: 'ACTIVE',
    hparams: {},
    restarts: 0,
    steps_completed: 0,
    start_time: '',
    end_time: null
  };
}

function metric(id: number, trialId: number, step: number, group = 'training'): IMetricReport {
  return {
    id,
    trial_id: trialId,
    group,
    steps_completed: step,
    metrics: { loss: 1 / step },
    report_time: ''
  };
}

function log(id: number, trialId = 1, rank: number | null = 0): ILogLine {
  return { id, trial_id: trialId, rank, stream: 'stdout', time: '', line: `line ${id}` };
}

describe('ExperimentListModel', () => {
  test('events update one experiment and keep a config fetched before', () => {
    const model = new ExperimentListModel();
    let changes = 0;
    model.changed.connect(() => (changes += 1));
    model.replaceAll([experiment(1, { config: { a: 1 } }), experiment(2)]);
    model.upsert(experiment(1, { state: 'PAUSED' }));
    model.upsert(experiment(3));
    assert.equal(model.size, 3);
    assert.equal(model.get(1)?.state, 'PAUSED');
    assert.deepEqual(model.get(1)?.config, { a: 1 });
    assert.equal(changes, 3);
  });
});

describe('ExperimentListModel.applyEvent', () => {
  test('a deletion event drops the experiment; others update it', () => {
    const model = new ExperimentListModel();
    let changes = 0;
    model.changed.connect(() => (changes += 1));
    model.replaceAll([experiment(1), experiment(2)]);
    model.applyEvent(experiment(2, { state: 'COMPLETED' }));
    model.applyEvent(experiment(1, { state: 'DELETED', deleted: true }));
    assert.deepEqual(
      [...model.experiments].map(e => [e.id, e.state]),
      [[2, 'COMPLETED']]
    );
    model.applyEvent(experiment(1, { state: 'DELETED', deleted: true })); // already gone
    assert.equal(changes, 3);
  });
});

describe('best validation from trial events', () => {
  function withBest(id: number, best: number | null, steps = 10): ITrial {
    return {
      ...trial(id, 1),
      best_validation:
        best === null ? null : { steps_completed: steps, metrics: { loss: best }, report_time: '' }
    };
  }

  test('the list takes a better validation from a trial event, and ignores a worse one', () => {
    const model = new ExperimentListModel();
    model.replaceAll([experiment(1, { best_validation: 0.5 })]);
    model.applyTrial(withBest(1, 0.7));
    assert.equal(model.get(1)?.best_validation, 0.5);
    model.applyTrial(withBest(1, 0.2));
    assert.equal(model.get(1)?.best_validation, 0.2);
    model.applyTrial({ ...withBest(2, 0.1), experiment_id: 99 });
    assert.equal(model.get(1)?.best_validation, 0.2);
  });

  test('larger is better when the searcher says so; a first validation always counts', () => {
    const model = new ExperimentListModel();
    model.replaceAll([
      experiment(1, { searcher: { name: 'single', metric: 'loss', smaller_is_better: false } })
    ]);
    model.applyTrial(withBest(1, 0.3));
    assert.equal(model.get(1)?.best_validation, 0.3);
    model.applyTrial(withBest(1, 0.2));
    assert.equal(model.get(1)?.best_validation, 0.3);
    model.applyTrial(withBest(1, 0.9));
    assert.equal(model.get(1)?.best_validation, 0.9);
  });

  test('the experiment view header follows too', () => {
    const model = new ExperimentDataModel(1);
    model.setExperiment(experiment(1, { best_validation: 0.5 }));
    model.applyEvent('trial', withBest(1, 0.25));
    assert.equal(model.experiment?.best_validation, 0.25);
  });
});

describe('ExperimentListModel.replaceAll', () => {
  test('keeps unchanged experiment objects and signals only real changes', () => {
    const model = new ExperimentListModel();
    let changes = 0;
    model.changed.connect(() => (changes += 1));
    model.replaceAll([experiment(1), experiment(2)]);
    const first = model.get(1);
    model.replaceAll([experiment(1), experiment(2)]);
    assert.equal(changes, 1, 'an identical answer is not a change');
    assert.equal(model.get(1), first, 'the row object is reused');
    model.replaceAll([experiment(1), experiment(2, { progress: 0.5 })]);
    assert.equal(changes, 2);
    assert.equal(model.get(1), first);
    assert.equal(model.get(2)?.progress, 0.5);
    model.replaceAll([experiment(2, { progress: 0.5 })]);
    assert.equal(changes, 3, 'a removed experiment is a change');
    assert.equal(model.get(1), undefined);
  });
});

describe('ExperimentListModel on an empty master', () => {
  test('the first answer is a change even when it is empty: the list stops "loading"', () => {
    const model = new ExperimentListModel();
    let changes = 0;
    model.changed.connect(() => (changes += 1));
    assert.equal(model.loaded, false);
    model.replaceAll([]);
    assert.equal(model.loaded, true);
    assert.equal(changes, 1);
    model.replaceAll([]);
    assert.equal(changes, 1, 'a second empty answer changes nothing');
  });
});

describe('ExperimentDataModel', () => {
  test('events of other experiments are ignored', () => {
    const model = new ExperimentDataModel(7);
    assert.equal(model.applyEvent('experiment', experiment(8)), null);
    assert.equal(model.applyEvent('trial', trial(1, 8)), null);
    assert.equal(
      model.applyEvent('checkpoint', {
        uuid: 'u',
        experiment_id: 8,
        trial_id: 1,
        steps_completed: 1,
        state: 'COMPLETED',
        report_time: ''
      }),
      null
    );
    assert.equal(model.experiment, null);
    assert.equal(model.trials.size, 0);
    assert.equal(model.checkpoints.size, 0);
  });

  test('metrics from REST and from events merge by id, in order, per group', () => {
    const model = new ExperimentDataModel(7);
    model.setTrials([trial(1), trial(2)]);
    assert.equal(model.addMetrics([metric(1, 1, 10), metric(2, 2, 10), metric(4, 1, 30)]), 3);
    // an event that overtook the fetch, then the fetch page that holds it again
    assert.equal(model.applyEvent('metric', metric(3, 1, 20)), 'metrics');
    assert.equal(
      model.addMetrics([metric(3, 1, 20), metric(4, 1, 30), metric(5, 1, 10, 'validation')]),
      1
    );
    assert.deepEqual(
      model
        .metricsOf('training')
        .get(1)
        ?.map(r => r.id),
      [1, 3, 4]
    );
    assert.deepEqual(
      model
        .metricsOf('validation')
        .get(1)
        ?.map(r => r.id),
      [5]
    );
    assert.equal(model.lastMetricId, 5);
  });

  test('metrics of unknown trials are not stored (the trial arrives first)', () => {
    const model = new ExperimentDataModel(7);
    assert.equal(model.applyEvent('metric', metric(1, 99, 1)), null);
    assert.equal(model.addMetrics([metric(1, 99, 1)]), 0);
    model.applyEvent('trial', trial(99));
    assert.equal(model.addMetrics([metric(1, 99, 1)]), 1);
  });

  test('experiment events keep the config of the first fetch', () => {
    const model = new ExperimentDataModel(7);
    model.setExperiment(experiment(7, { config: { searcher: { name: 'single' } } }));
    model.applyEvent('experiment', experiment(7, { state: 'PAUSED' }));
    assert.equal(model.experiment?.state, 'PAUSED');
    assert.deepEqual(model.experiment?.config, { searcher: { name: 'single' } });
  });

  test('log events are flagged only for this experiment’s trials', () => {
    const model = new ExperimentDataModel(7);
    model.setTrials([trial(1)]);
    assert.equal(model.applyEvent('log', log(1, 1)), 'logs');
    assert.equal(model.applyEvent('log', log(2, 5)), null);
  });
});

describe('LogBuffer', () => {
  test('dedupes, orders, ignores other trials, and stays bounded', () => {
    const buffer = new LogBuffer(1, 3);
    assert.equal(buffer.add([log(2), log(1), log(2), log(9, 2)]), 2);
    assert.deepEqual(
      buffer.lines.map(l => l.id),
      [1, 2]
    );
    buffer.add([log(3, 1, 1), log(4, 1, 1)]);
    assert.deepEqual(
      buffer.lines.map(l => l.id),
      [2, 3, 4]
    );
    assert.equal(buffer.lastId, 4);
    assert.deepEqual(buffer.ranks(), [0, 1]);
    // a dropped line may come back from a re-fetch; it is old, and kept in order
    buffer.add([log(1)]);
    assert.deepEqual(
      buffer.lines.map(l => l.id),
      [2, 3, 4]
    );
  });
});

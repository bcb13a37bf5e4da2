/**
 * Unit tests of the Models section's state: list answers and `model` / `checkpoint` events
 * merge, opened models know when their versions are stale, and a version's row text says
 * which checkpoint, experiment, trial and step it is.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ModelRegistryModel, summarizeVersion } from '../src/model/modelRegistry';
import type { ICheckpoint, IModel, IModelVersion } from '../src/api/types';

function model(id: number, name: string, updated = 't1'): IModel {
  return {
    id,
    name,
    description: '',
    metadata: {},
    labels: [],
    archived: false,
    creation_time: 't0',
    last_updated_time: updated,
    num_versions: 0
  };
}

function checkpoint(uuid: string, overrides: Partial<ICheckpoint> = {}): ICheckpoint {
  return {
    uuid,
    trial_id: 7,
    experiment_id: 4,
    steps_completed: 300,
    state: 'COMPLETED',
    report_time: '',
    validation_metrics: { loss: 0.25, acc: 0.9 },
    ...overrides
  };
}

function version(n: number, uuid: string, name = ''): IModelVersion {
  return {
    id: n,
    model_id: 1,
    model_name: 'm',
    version: n,
    checkpoint_uuid: uuid,
    checkpoint: checkpoint(uuid),
    name,
    comment: '',
    notes: '',
    metadata: {},
    labels: [],
    creation_time: '',
    last_updated_time: ''
  };
}

describe('summarizeVersion', () => {
  test('names the checkpoint, its experiment, trial, step and metrics', () => {
    const summary = summarizeVersion(version(2, '3f2a9c1e-0000-4000-8000-000000000000', 'best'));
    assert.deepEqual(summary, {
      title: 'v2 · best',
      checkpoint: 'checkpoint 3f2a9c1e…',
      source: 'experiment 4 · trial 7 · step 300',
      metrics: 'acc 0.9, loss 0.25',
      experimentId: 4
    });
  });

  test('says so when the checkpoint is not COMPLETED or its record is gone', () => {
    const deleted = {
      ...version(1, 'abcdefgh-1'),
      checkpoint: checkpoint('abcdefgh-1', { state: 'DELETED', validation_metrics: null })
    };
    assert.equal(summarizeVersion(deleted).checkpoint, 'checkpoint abcdefgh… (DELETED)');
    assert.equal(summarizeVersion(deleted).metrics, '');
    const lost = { ...version(1, 'abcdefgh-1'), checkpoint: null };
    assert.equal(summarizeVersion(lost).source, 'checkpoint record not found');
    assert.equal(summarizeVersion(lost).experimentId, null);
  });
});

describe('ModelRegistryModel', () => {
  test('lists by name and applies model events, deletions included', () => {
    const registry = new ModelRegistryModel();
    let changes = 0;
    registry.changed.connect(() => changes++);
    assert.equal(registry.loaded, false);
    registry.replaceAll([model(2, 'zeta'), model(1, 'alpha')]);
    assert.equal(registry.loaded, true);
    assert.deepEqual(
      registry.models.map(m => m.name),
      ['alpha', 'zeta']
    );
    registry.applyEvent(model(3, 'beta'));
    registry.applyEvent({ id: 2, name: 'zeta', deleted: true });
    assert.deepEqual(
      registry.models.map(m => m.name),
      ['alpha', 'beta']
    );
    assert.equal(changes, 3);
  });

  test('an opened model reloads its versions only when it changed', () => {
    const registry = new ModelRegistryModel();
    registry.replaceAll([model(1, 'm', 't1')]);
    assert.equal(registry.toggle(1), true); // opened, nothing loaded yet
    registry.setVersions(1, [version(1, 'u1')]);
    assert.equal(registry.versions(1)?.length, 1);
    assert.equal(registry.applyEvent(model(1, 'm', 't1')), false); // same update time
    assert.equal(registry.applyEvent(model(1, 'm', 't2')), true); // a version was registered
    assert.deepEqual(registry.replaceAll([model(1, 'm', 't3')]), [1]);
    assert.deepEqual(registry.replaceAll([model(1, 'm', 't3')]), []);
    assert.equal(registry.toggle(1), false); // closed
    assert.equal(registry.applyEvent(model(1, 'm', 't4')), false); // closed: nothing to reload
    assert.equal(registry.toggle(1), false); // reopened: its versions are still there
  });

  test('a checkpoint event updates the versions that name it', () => {
    const registry = new ModelRegistryModel();
    registry.replaceAll([model(1, 'm')]);
    registry.toggle(1);
    registry.setVersions(1, [version(2, 'u2'), version(1, 'u1')]);
    registry.applyCheckpoint(checkpoint('u1', { metadata: { note: 'x' } }));
    const [second, first] = registry.versions(1) ?? [];
    assert.deepEqual(first.checkpoint?.metadata, { note: 'x' });
    assert.equal(second.checkpoint?.metadata, undefined);
  });

  test('a model gone from the list is closed and forgotten', () => {
    const registry = new ModelRegistryModel();
    registry.replaceAll([model(1, 'm')]);
    registry.toggle(1);
    registry.setVersions(1, [version(1, 'u1')]);
    registry.replaceAll([]);
    assert.equal(registry.isOpen(1), false);
    assert.equal(registry.versions(1), undefined);
  });
});

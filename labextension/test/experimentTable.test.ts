/**
 * Unit tests of the sidebar's experiment table logic: sorting (best metric, duration, name),
 * filtering (words, labels, state, archived), labels typed as text, bulk action targets and
 * tab titles.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  DEFAULT_SORT,
  ITableFilter,
  NO_TABLE_FILTER,
  bulkSummary,
  bulkTargets,
  durationSeconds,
  experimentOwner,
  experimentTabTitle,
  experimentWorkspace,
  filterTable,
  hasOwners,
  nextSort,
  ownerChoices,
  parseLabels,
  sortExperiments,
  tableRows,
  workspaceChoices
} from '../src/model/experimentTable';
import { sameListFields } from '../src/model/model';
import type { IExperiment } from '../src/api/types';

function experiment(id: number, overrides: Partial<IExperiment> = {}): IExperiment {
  return {
    id,
    name: `exp-${id}`,
    state: 'COMPLETED',
    archived: false,
    progress: 1,
    start_time: '2026-11-22T01:00:00.000Z',
    end_time: '2026-11-22T01:10:00.000Z',
    searcher: { name: 'single', metric: 'loss', smaller_is_better: true },
    num_trials: 1,
    best_validation: null,
    labels: [],
    notes: '',
    ...overrides
  };
}

const ids = (list: IExperiment[]): number[] => list.map(e => e.id);

describe('sorting', () => {
  const list = [
    experiment(1, { best_validation: 0.5 }),
    experiment(2, { best_validation: null }),
    experiment(3, { best_validation: 0.1 }),
    experiment(4, { best_validation: 0.9 }),
    experiment(5, { best_validation: Number.NaN })
  ];

  test('the default is newest first', () => {
    assert.deepEqual(ids(sortExperiments(list, DEFAULT_SORT)), [5, 4, 3, 2, 1]);
  });

  test('by best metric both ways, experiments without one always last', () => {
    assert.deepEqual(
      ids(sortExperiments(list, { key: 'best', direction: 'asc' })),
      [3, 1, 4, 5, 2]
    );
    assert.deepEqual(
      ids(sortExperiments(list, { key: 'best', direction: 'desc' })),
      [4, 1, 3, 5, 2]
    );
  });

  test('does not change the list it was given', () => {
    const copy = [...list];
    sortExperiments(list, { key: 'best', direction: 'asc' });
    assert.deepEqual(list, copy);
  });

  test('by name ignores case; ties fall back to newest first', () => {
    const named = [
      experiment(1, { name: 'beta' }),
      experiment(2, { name: 'Alpha' }),
      experiment(3, { name: 'beta' })
    ];
    assert.deepEqual(ids(sortExperiments(named, { key: 'name', direction: 'asc' })), [2, 3, 1]);
  });

  test('by duration: a running experiment counts until now', () => {
    const now = Date.parse('2026-11-22T02:00:00.000Z');
    const list2 = [
      experiment(1), // 10 minutes
      experiment(2, { state: 'ACTIVE', end_time: null }), // 60 minutes so far
      experiment(3, { end_time: '2026-11-22T01:00:30.000Z' }) // 30 s
    ];
    assert.equal(durationSeconds(list2[1], now), 3600);
    assert.deepEqual(
      ids(sortExperiments(list2, { key: 'duration', direction: 'desc' }, now)),
      [2, 1, 3]
    );
  });

  test('a finished experiment without an end time has no duration', () => {
    assert.equal(durationSeconds(experiment(1, { end_time: null })), null);
    assert.equal(durationSeconds(experiment(1, { start_time: 'garbage' })), null);
  });

  test('a header click flips its column, another column starts in its natural direction', () => {
    assert.deepEqual(nextSort(DEFAULT_SORT, 'id'), { key: 'id', direction: 'asc' });
    assert.deepEqual(nextSort(DEFAULT_SORT, 'best'), { key: 'best', direction: 'asc' });
    assert.deepEqual(nextSort({ key: 'best', direction: 'asc' }, 'best'), {
      key: 'best',
      direction: 'desc'
    });
    assert.deepEqual(nextSort(DEFAULT_SORT, 'duration'), { key: 'duration', direction: 'desc' });
  });

  test('a thousand experiments sort by every column', () => {
    const many = Array.from({ length: 1000 }, (_, i) =>
      experiment(i + 1, { best_validation: (i * 7919) % 1000, labels: [`l${i % 13}`] })
    );
    const sorted = sortExperiments(many, { key: 'best', direction: 'asc' });
    assert.equal(sorted.length, 1000);
    for (let i = 1; i < sorted.length; i++) {
      assert.ok((sorted[i - 1].best_validation ?? 0) <= (sorted[i].best_validation ?? 0));
    }
    for (const key of ['name', 'state', 'owner', 'labels', 'duration'] as const) {
      assert.equal(sortExperiments(many, { key, direction: 'asc' }).length, 1000);
    }
  });
});

describe('filtering', () => {
  const list = [
    experiment(1, { name: 'mnist-search', labels: ['baseline', 'cnn'] }),
    experiment(2, { name: 'cifar', labels: ['cnn'], notes: 'try a wider net' }),
    experiment(3, { name: 'mnist-old', archived: true }),
    experiment(12, { name: 'bert', state: 'ACTIVE', end_time: null })
  ];

  test('every word must match a name, label or note', () => {
    const text = (t: string) => ids(filterTable(list, { state: '', text: t, showArchived: false }));
    assert.deepEqual(text('mnist'), [1]);
    assert.deepEqual(text('cnn'), [1, 2]);
    assert.deepEqual(text('CNN mnist'), [1]);
    assert.deepEqual(text('wider'), [2]);
    assert.deepEqual(text('label:base'), [1]);
    assert.deepEqual(text('label:mnist'), [], 'label: only looks at labels');
    assert.deepEqual(text(' 12 '), [12], 'an id');
    assert.deepEqual(text(''), [1, 2, 12]);
  });

  test('archived experiments only when asked; state exactly', () => {
    assert.deepEqual(
      ids(filterTable(list, { state: '', text: 'mnist', showArchived: true })),
      [1, 3]
    );
    assert.deepEqual(
      ids(filterTable(list, { state: 'ACTIVE', text: '', showArchived: false })),
      [12]
    );
  });

  test('the table filters, then sorts', () => {
    assert.deepEqual(
      ids(tableRows(list, { state: '', text: 'cnn', showArchived: false }, DEFAULT_SORT)),
      [2, 1]
    );
  });
});

describe('labels and owners', () => {
  test('labels typed with commas: trimmed, no empties, no repeats, order kept', () => {
    assert.deepEqual(parseLabels(' cnn, baseline,,cnn ,\n  final '), ['cnn', 'baseline', 'final']);
    assert.deepEqual(parseLabels('   '), []);
  });

  test('the owner column only exists when experiments have several owners', () => {
    assert.equal(hasOwners([experiment(1), experiment(2)]), false);
    const owned = { ...experiment(3), owner: 'ana' } as IExperiment;
    assert.equal(experimentOwner(owned), 'ana');
    const bos = { ...experiment(4), user: { username: 'bo' } } as unknown as IExperiment;
    assert.equal(experimentOwner(bos), 'bo');
    const anas = { ...experiment(5), username: 'ana' } as unknown as IExperiment;
    assert.equal(experimentOwner(anas), 'ana');
    // One person's master: every experiment is theirs, the column would tell nothing.
    assert.equal(hasOwners([experiment(1), owned, anas]), false);
    assert.equal(hasOwners([experiment(1), owned, bos]), true);
  });

  test('a rename, a label or a note counts as a change of the listed experiment', () => {
    const a = experiment(1, { labels: ['x'] });
    assert.equal(sameListFields(a, { ...a }), true);
    assert.equal(sameListFields(a, { ...a, labels: ['x', 'y'] }), false);
    assert.equal(sameListFields(a, { ...a, notes: 'n' }), false);
    assert.equal(sameListFields(a, { ...a, name: 'renamed' }), false);
  });
});

describe('bulk actions', () => {
  const selection = [
    experiment(1, { state: 'ACTIVE', end_time: null }),
    experiment(2, { state: 'PAUSED', end_time: null }),
    experiment(3),
    experiment(4, { archived: true })
  ];

  test('each action applies only where the master accepts it', () => {
    const split = (action: Parameters<typeof bulkTargets>[1]) => {
      const { apply, skip } = bulkTargets(selection, action);
      return [ids(apply), ids(skip)];
    };
    assert.deepEqual(split('kill'), [
      [1, 2],
      [3, 4]
    ]);
    assert.deepEqual(split('pause'), [[1], [2, 3, 4]]);
    assert.deepEqual(split('archive'), [[3], [1, 2, 4]]);
    assert.deepEqual(split('unarchive'), [[4], [1, 2, 3]]);
    assert.deepEqual(split('delete'), [
      [3, 4],
      [1, 2]
    ]);
  });

  test('a kernel-run experiment cannot be paused from the table', () => {
    const kernel = experiment(5, { state: 'ACTIVE', end_time: null, unmanaged: true });
    assert.deepEqual(ids(bulkTargets([kernel], 'pause').apply), []);
    assert.deepEqual(ids(bulkTargets([kernel], 'kill').apply), [5]);
  });

  test('the summary says what was done, skipped and failed', () => {
    assert.equal(bulkSummary('archive', 3, 0, []), 'archive: 3 experiments');
    assert.equal(
      bulkSummary('delete', 1, 2, [{ id: 7, message: 'conflict' }]),
      'delete: 1 experiment, 2 skipped (not allowed in their state), 1 failed (experiment 7: conflict)'
    );
  });
});

describe('tab titles', () => {
  test('read "Experiment <id>: <name>"', () => {
    assert.equal(experimentTabTitle(12, 'mnist-search'), 'Experiment 12: mnist-search');
    assert.equal(experimentTabTitle(12, '  '), 'Experiment 12');
    assert.equal(experimentTabTitle(12, null), 'Experiment 12');
  });
});

describe('the user and workspace filters (docs/team.md)', () => {
  const list = [
    experiment(1, { username: 'alice', workspaceName: 'Uncategorized' }),
    experiment(2, { username: 'bob', workspaceName: 'vision' }),
    experiment(3, { username: 'alice', workspaceName: 'vision' }),
    experiment(4, { username: 'carol' })
  ];

  test('the choices are the listed owners and workspaces, sorted, without blanks', () => {
    assert.deepEqual(ownerChoices(list), ['alice', 'bob', 'carol']);
    assert.deepEqual(workspaceChoices(list), ['Uncategorized', 'vision']);
    assert.equal(experimentWorkspace(list[3]), '');
  });

  test('a user narrows the list to their experiments, a workspace to its experiments', () => {
    const only = (filter: Partial<ITableFilter>) =>
      ids(filterTable(list, { ...NO_TABLE_FILTER, ...filter }));
    assert.deepEqual(only({}), [1, 2, 3, 4]);
    assert.deepEqual(only({ owner: 'alice' }), [1, 3]);
    assert.deepEqual(only({ workspace: 'vision' }), [2, 3]);
    assert.deepEqual(only({ owner: 'alice', workspace: 'vision' }), [3]);
    assert.deepEqual(only({ owner: 'nobody' }), []);
  });

  test('a moved experiment is a changed row (its workspace is a list field)', () => {
    const moved = { ...list[1], workspaceName: 'Uncategorized' };
    assert.equal(sameListFields(list[1], moved), false);
    assert.equal(sameListFields(list[1], { ...list[1] }), true);
  });
});

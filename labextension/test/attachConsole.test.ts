/**
 * Unit tests of Attach / Debug in console: which kernel the console gets, which one closing the
 * console shuts down, and what the attached console runs first.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { IAttachDeps, openTrialConsole } from '../src/notebook/attachConsole';
import type { ITrialKernel } from '../src/api/types';

interface IRecorded {
  deps: IAttachDeps;
  created: Record<string, unknown>[];
  injected: string[];
}

/** JupyterLab and the master, recorded: the master answers `info`; consoles record injections. */
function recording(info: ITrialKernel | Error): IRecorded {
  const created: Record<string, unknown>[] = [];
  const injected: string[] = [];
  const deps: IAttachDeps = {
    trialKernel: async () => {
      if (info instanceof Error) {
        throw info;
      }
      return info;
    },
    execute: async (command, args) => {
      assert.equal(command, 'console:create');
      created.push(args);
      return {
        sessionContext: { ready: Promise.resolve() },
        console: { inject: async (code: string) => void injected.push(code) }
      };
    }
  };
  return { deps, created, injected };
}

function kernel(overrides: Partial<ITrialKernel>): ITrialKernel {
  return {
    trial_id: 12,
    allocation_id: 'trial-12.1',
    state: 'RUNNING',
    post_mortem: false,
    jupyter_kernel_id: 'trial-kernel-id',
    ...overrides
  };
}

describe('openTrialConsole', () => {
  test('a running trial: a small python3 kernel of its own, shut down with the console', async () => {
    const { deps, created, injected } = recording(kernel({}));
    await openTrialConsole(12, deps);
    assert.equal(created.length, 1);
    assert.equal(created[0].name, 'trial-12 (attached)');
    // Never the trial's kernel: closing this console must not end the training.
    assert.deepEqual(created[0].kernelPreference, { name: 'python3', shutdownOnDispose: true });
    assert.deepEqual(injected, ['%load_ext jupyter_determined\n%det attach 12 --console']);
  });

  test("a failed trial: the trial's own kernel, left running when the console closes", async () => {
    const { deps, created, injected } = recording(kernel({ state: 'ERROR', post_mortem: true }));
    await openTrialConsole(12, deps);
    assert.equal(created[0].name, 'trial-12');
    assert.deepEqual(created[0].kernelPreference, {
      id: 'trial-kernel-id',
      shutdownOnDispose: false
    });
    assert.deepEqual(injected, []);
  });

  test('a kernel this server did not start (a gateway’s): the forwarding console, running or failed', async () => {
    for (const state of [
      { state: 'RUNNING', post_mortem: false },
      { state: 'ERROR', post_mortem: true }
    ]) {
      const { deps, created, injected } = recording(
        kernel({ ...state, jupyter_kernel_id: undefined })
      );
      await openTrialConsole(12, deps);
      assert.equal(created.length, 1);
      assert.deepEqual(created[0].kernelPreference, { name: 'python3', shutdownOnDispose: true });
      assert.deepEqual(injected, ['%load_ext jupyter_determined\n%det attach 12 --console']);
    }
  });

  test('no console when the master says why there is no kernel', async () => {
    const ended = recording(new Error('trial 12 does not run in a kernel'));
    await assert.rejects(openTrialConsole(12, ended.deps), /does not run in a kernel/);
    assert.deepEqual(ended.created, []);
  });
});

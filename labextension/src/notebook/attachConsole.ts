/**
 * The console that *Attach* / *Debug in console* opens on a kernel trial (the experiment view's
 * Trials table, the notebook widget's error banner).
 */
import type { ITrialKernel } from '../api/types';

/** What Attach needs of a console panel (`console:create` returns one). */
export interface IForwardingConsole {
  sessionContext: { ready: Promise<void> };
  console: { inject(code: string): Promise<void> };
}

/** What Attach needs of JupyterLab and the master. */
export interface IAttachDeps {
  /** The master's `GET /trials/{id}/kernel`. */
  trialKernel(trialId: number): Promise<ITrialKernel>;
  /** `app.commands.execute`. */
  execute(command: string, args: Record<string, unknown>): Promise<unknown>;
}

/**
 * Open a console on a kernel trial's kernel (the server's kernel manager started it).
 *
 * After a failure (post-mortem) the console joins that kernel itself: its main shell is idle and
 * %debug wants it; closing the console leaves the trial's kernel alone (it ends with its trial,
 * or after keep_alive). While the trial runs, that main shell is busy with the training and would
 * not even answer the console's first request, so the console gets a small python3 kernel of its
 * own that forwards each cell to a subshell of the trial's kernel (`%det attach ID --console`,
 * ipykernel 7): it answers at once, with the script's live globals, and never holds the training
 * up. That small kernel serves this console only, so closing the console shuts it down
 * (`shutdownOnDispose`).
 *
 * A kernel this Jupyter server did not start (on a Jupyter Gateway, or a standalone master's)
 * gets the forwarding console in both states: after a failure its cells run on the idle main
 * shell, where `%debug` works too (its prompts are answered in the console).
 *
 * @throws Error: the master says why there is no kernel (a 409).
 */
export async function openTrialConsole(trialId: number, deps: IAttachDeps): Promise<void> {
  const info = await deps.trialKernel(trialId);
  // A kernel this server did not start (on a Jupyter Gateway, or a standalone master's) cannot
  // be a console's own kernel here: the forwarding console reaches it in either state.
  if (info.post_mortem && info.jupyter_kernel_id) {
    await deps.execute('console:create', {
      name: `trial-${trialId}`,
      kernelPreference: { id: info.jupyter_kernel_id, shutdownOnDispose: false },
      insertMode: 'split-right',
      activate: true
    });
    return;
  }
  const panel = (await deps.execute('console:create', {
    name: `trial-${trialId} (attached)`,
    kernelPreference: { name: 'python3', shutdownOnDispose: true },
    insertMode: 'split-right',
    activate: true
  })) as IForwardingConsole;
  await panel.sessionContext.ready;
  await panel.console.inject(`%load_ext jupyter_determined\n%det attach ${trialId} --console`);
}

/**
 * jupyter-determined: the "Determined" sidebar, experiment views, and the notebook
 * "Submit to Determined" button, talking to the master served by the jupyter_determined
 * server extension under `<base_url>determined/api/v1`.
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import {
  ICommandPalette,
  MainAreaWidget,
  WidgetTracker,
  showErrorMessage
} from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon } from '@jupyterlab/ui-components';
import { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { DeterminedClient } from './api/client';
import { openTrialConsole } from './notebook/attachConsole';
import { EventHub } from './api/events';
import { ExperimentView } from './views/experimentView';
import { setActionContext } from './views/actionDialogs';
import { ExperimentCompareView } from './views/experimentCompare';
import { activateExportTools } from './export/exportTools';
import { type INotebookOpener, useInNotebookHandler } from './notebook/notebookInsert';
import { attachErrorBanner, goToErrorCell } from './notebook/notebookBanner';
import { experimentRendererFactory } from './notebook/notebookWidget';
import { notifyWhenNotebookExperimentsEnd } from './notebook/endNotifier';
import { DeterminedSidebar } from './views/sidebar';
import { SubmitButtonExtension } from './notebook/submit';
import { tensorBoardFor, tensorBoardWidget, waitUntilServing } from './views/tensorboard';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161"><path d="M4 3h7a9 9 0 0 1 0 18H4zm3 3v12h4a6 6 0 0 0 0-12z"/></g></svg>`;

export const determinedIcon = new LabIcon({ name: 'jupyter-determined:logo', svgstr: ICON_SVG });

export const CommandIDs = {
  openExperiment: 'determined:open-experiment',
  openTensorBoard: 'determined:open-tensorboard',
  showSidebar: 'determined:show-sidebar'
} as const;

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-determined:plugin',
  description:
    'Determined experiments in JupyterLab: sidebar, experiment views, notebook submission.',
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette, IRenderMimeRegistry, INotebookTracker],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    rendermime: IRenderMimeRegistry | null,
    notebooks: INotebookTracker | null
  ) => {
    const client = new DeterminedClient(app.serviceManager.serverSettings);
    const hub = new EventHub(client);
    const tracker = new WidgetTracker<MainAreaWidget<ExperimentView>>({
      namespace: 'jupyter-determined'
    });

    // Attach / Debug in console: see openTrialConsole for which kernel the console gets.
    const attachToTrial = (trialId: number): void => {
      openTrialConsole(trialId, {
        trialKernel: id => client.trialKernel(id),
        execute: (command, args) => app.commands.execute(command, args as ReadonlyPartialJSONObject)
      }).catch(error => void showErrorMessage(`Attach to trial ${trialId}`, String(error)));
    };

    // Opens an experiment's notebook for "Use in notebook" when it is not open yet.
    const notebookOpener: INotebookOpener = {
      async open(path: string) {
        const widget: unknown = await app.commands.execute('docmanager:open', {
          path,
          factory: 'Notebook'
        });
        return notebooks?.find(panel => panel === widget) ?? null;
      }
    };
    const openExperiment = (id: number, options: { newTab?: boolean } = {}): void => {
      app.commands
        .execute(CommandIDs.openExperiment, { id, newTab: options.newTab === true })
        .catch(error => console.error(error));
    };
    // "Open" on the notification of an experiment made by Fork / Re-run / Continue.
    setActionContext(client, id => openExperiment(id));
    // The one experiment tab that a plain open reuses (like an editor's preview tab); tabs
    // opened with `newTab` (Ctrl/⌘-click, "Open in a new tab", a restored layout) stay.
    let reusableTab: MainAreaWidget<ExperimentView> | null = null;

    // TensorBoard tabs by TensorBoard id: a second click on the button shows the open tab.
    const tensorBoardTabs = new Map<string, MainAreaWidget>();
    app.commands.addCommand(CommandIDs.openTensorBoard, {
      label: 'Open TensorBoard of Determined Experiments',
      execute: async args => {
        const ids = Array.isArray(args.experimentIds) ? args.experimentIds.map(Number) : [];
        if (!ids.length || !ids.every(Number.isInteger)) {
          throw new Error(
            `${CommandIDs.openTensorBoard}: expected "experimentIds", a list of integers, got ${JSON.stringify(args.experimentIds)}`
          );
        }
        const board = await waitUntilServing(client, await tensorBoardFor(client, ids));
        const open = tensorBoardTabs.get(board.id);
        if (open && !open.isDisposed) {
          app.shell.activateById(open.id);
          return open;
        }
        const widget = tensorBoardWidget(board, app.serviceManager.serverSettings);
        tensorBoardTabs.set(board.id, widget);
        widget.disposed.connect(() => tensorBoardTabs.delete(board.id));
        app.shell.add(widget, 'main');
        app.shell.activateById(widget.id);
        return widget;
      }
    });
    const openTensorBoard = async (experimentId: number): Promise<void> => {
      await app.commands.execute(CommandIDs.openTensorBoard, { experimentIds: [experimentId] });
    };

    const keepTab = (widget: MainAreaWidget<ExperimentView>): void => {
      reusableTab = null;
      widget.title.className = '';
    };

    app.commands.addCommand(CommandIDs.openExperiment, {
      label: args =>
        args.id !== undefined
          ? `Open Determined Experiment ${args.id}`
          : 'Open Determined Experiment',
      execute: async args => {
        const id = Number(args.id);
        if (!Number.isInteger(id)) {
          throw new Error(
            `${CommandIDs.openExperiment}: expected an integer "id", got ${JSON.stringify(args.id)}`
          );
        }
        const newTab = args.newTab === true;
        const existing = tracker.find(w => w.content.experimentId === id);
        if (existing) {
          if (newTab && existing === reusableTab) {
            keepTab(existing); // asked for a tab of its own: the next plain open leaves it
          }
          app.shell.activateById(existing.id);
          return existing;
        }
        // "Use in notebook" from a main-area tab: the experiment's notebook (opened if need be),
        // else the one the user picks (notebookInsert.ts).
        const content = new ExperimentView(
          id,
          client,
          hub,
          openTensorBoard,
          useInNotebookHandler(client, notebooks, undefined, notebookOpener),
          attachToTrial
        );
        attachErrorBanner(content, {
          goToCell: notebooks
            ? goToErrorCell(notebooks, notebookOpener, panel => app.shell.activateById(panel.id))
            : undefined,
          onAttach: attachToTrial
        });
        const widget = new MainAreaWidget({ content });
        widget.id = `${content.id}-tab`; // ids are unique in the page: the view keeps its own
        widget.title.icon = determinedIcon;
        content.title.changed.connect(() => {
          widget.title.label = content.title.label;
          widget.title.caption = content.title.caption;
        });
        widget.title.label = content.title.label;
        widget.title.closable = true;
        await tracker.add(widget);
        const replaced = !newTab && reusableTab && !reusableTab.isDisposed ? reusableTab : null;
        // The new tab takes the reused one's place in the dock, then that one closes.
        app.shell.add(widget, 'main', replaced ? { ref: replaced.id, mode: 'tab-after' } : {});
        if (!newTab) {
          reusableTab = widget;
          widget.title.className = 'jp-Det-reusedTab';
        }
        widget.disposed.connect(() => {
          if (reusableTab === widget) {
            reusableTab = null;
          }
        });
        replaced?.dispose();
        app.shell.activateById(widget.id);
        void content.start();
        return widget;
      }
    });

    // The experiment widget under notebook cells (outputs of jupyter_determined's widget). The
    // registry is the app's: notebooks opened from now on clone it with this renderer in.
    rendermime?.addFactory(experimentRendererFactory(client, hub, notebooks, attachToTrial));

    // "Use" on a model version: the version's checkpoint, into the notebook the user picks.
    // Experiments side by side: each one's best trial (experimentCompare.ts).
    const compareExperiments = (ids: number[]): void => {
      const view = new ExperimentCompareView(client, ids, id => openExperiment(id));
      const widget = new MainAreaWidget({ content: view });
      widget.id = `${view.id}-tab`;
      widget.title.label = view.title.label;
      widget.title.icon = determinedIcon;
      widget.title.closable = true;
      app.shell.add(widget, 'main');
      app.shell.activateById(widget.id);
      void view.load();
    };
    const sidebar = new DeterminedSidebar(
      client,
      hub,
      openExperiment,
      useInNotebookHandler(client, notebooks, undefined, notebookOpener),
      compareExperiments
    );
    sidebar.title.icon = determinedIcon;
    app.shell.add(sidebar, 'left', { rank: 600 });
    // Nothing is requested until the panel is first shown (DeterminedSidebar.onAfterShow).
    app.commands.addCommand(CommandIDs.showSidebar, {
      label: 'Show Determined Experiments',
      execute: () => {
        app.shell.activateById(sidebar.id);
        void sidebar.start();
      }
    });
    if (palette) {
      palette.addItem({ command: CommandIDs.showSidebar, category: 'Determined' });
    }
    if (restorer) {
      restorer.add(sidebar, sidebar.id);
      void restorer.restore(tracker, {
        command: CommandIDs.openExperiment,
        args: widget => ({ id: widget.content.experimentId, newTab: true }),
        name: widget => String(widget.content.experimentId)
      });
    }

    // A notification when an experiment started from an open notebook ends (endNotifier.ts).
    if (notebooks) {
      notifyWhenNotebookExperimentsEnd(client, hub, notebooks, openExperiment);
    }

    app.docRegistry.addWidgetExtension(
      'Notebook',
      new SubmitButtonExtension(app.serviceManager.contents, openExperiment)
    );
    activateExportTools(app, notebooks, palette); // Preview Export, det-skip toggles (exportTools.ts)

    // `<lab>?det-experiment=ID` (Determined's core_v2.url_reverse_webui_exp_view() gives such
    // URLs for a hosted master): open that experiment's view once the layout is restored.
    const requested = new URLSearchParams(window.location.search).get('det-experiment');
    if (requested !== null && /^[1-9][0-9]*$/.test(requested)) {
      void app.restored.then(() => openExperiment(Number(requested)));
    }
  }
};

export default plugin;

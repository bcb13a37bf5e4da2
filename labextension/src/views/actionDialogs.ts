/**
 * The dialogs that make something new from an experiment's results, shared by the sidebar's
 * experiment tab and the notebook widget (both are an ExperimentView):
 *
 * * Fork: the parent's config, editable, and the parent's model definition (Determined's fork);
 * * Re-run / Continue a trial: a single-searcher experiment with its hyperparameters, from
 *   scratch or from its latest checkpoint, for a length the user may change;
 * * Register a checkpoint in the model registry: an existing model, or a new one.
 *
 * A refused request (a config error, a name taken) opens the dialog again with what was typed
 * and the master's message, instead of losing the edit. A new experiment is announced with a
 * notification whose button opens it.
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { DeterminedClient, describeError } from '../api/client';
import { h } from '../dom';
import {
  canContinue,
  canRunAgain,
  forkConfigText,
  modelNameProblem,
  parseLength,
  searcherLength
} from '../model/actions';
import type { ExperimentDataModel } from '../model/model';
import type { IExperiment, ITrial } from '../api/types';

/** How a dialog opens an experiment (set once by the plugin: its open-experiment command). */
let opener: ((id: number) => void) | null = null;
/** The plugin's client, for the header's Fork… (which has no client of its own). */
let actionClient: DeterminedClient | null = null;

/** Set the plugin's client and how the dialogs open a new experiment (its open-experiment
 * command); until then the header offers no Fork…. */
export function setActionContext(client: DeterminedClient, open: (id: number) => void): void {
  actionClient = client;
  opener = open;
}

/** The header's Fork… handler for this experiment; none before the plugin set its client or
 * for a run that trained in a kernel (no model definition to run again). */
export function forkHandler(experiment: IExperiment): (() => void) | undefined {
  const client = actionClient;
  if (!client || !canRunAgain(experiment)) {
    return undefined;
  }
  return () => void forkDialog(client, experiment);
}

/** The trials table's "↻" handler: re-run or continue the trial (none for a kernel run). */
export function runAgainHandler(
  client: DeterminedClient,
  model: ExperimentDataModel
): ((trialId: number) => void) | undefined {
  const experiment = model.experiment;
  if (!experiment || !canRunAgain(experiment)) {
    return undefined;
  }
  return trialId => {
    const trial = model.trials.get(trialId);
    if (trial) {
      void trialRunDialog(client, experiment, trial);
    }
  };
}

function announce(experiment: IExperiment, what: string): void {
  Notification.success(`Created experiment ${experiment.id} (${what})`, {
    autoClose: 8000,
    actions: opener
      ? [
          {
            label: 'Open',
            caption: `Open experiment ${experiment.id}`,
            callback: () => opener?.(experiment.id)
          }
        ]
      : []
  });
}

function problemNode(problem: string): HTMLElement | null {
  return problem ? h('div', { class: 'jp-Det-error jp-Det-dialogProblem' }, problem) : null;
}

/** Fork the experiment: its config (editable JSON or YAML) and its model definition. */
export async function forkDialog(client: DeterminedClient, experiment: IExperiment): Promise<void> {
  if (!experiment.config) {
    // An event's JSON has no config: read it (GET /experiments/{id} has it, secrets redacted).
    try {
      experiment = (await client.getExperiment(experiment.id)).experiment;
    } catch (error) {
      Notification.error(`Fork: cannot read the config: ${describeError(error)}`, {
        autoClose: false
      });
      return;
    }
  }
  let text = forkConfigText(experiment);
  let activate = true;
  let problem = '';
  for (;;) {
    const area = h('textarea', {
      class: 'jp-Det-forkConfig jp-Det-mono',
      props: { value: text, rows: 18, spellcheck: false },
      attrs: { 'aria-label': 'The new experiment config (JSON or YAML)' }
    });
    const start: HTMLInputElement = h('input', { props: { type: 'checkbox', checked: activate } });
    const body = new Widget({
      node: h(
        'div',
        { class: 'jp-Det-dialogBody jp-Det-forkDialog' },
        h(
          'p',
          null,
          `A new experiment with experiment ${experiment.id}'s model definition and this config ` +
            '(JSON or YAML; secrets shown as ******** keep their values).'
        ),
        problemNode(problem),
        area,
        h('label', { class: 'jp-Det-checkbox' }, start, ' start it now')
      )
    });
    const answer = await showDialog({
      title: `Fork experiment ${experiment.id}`,
      body,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Fork' })]
    });
    if (!answer.button.accept) {
      return;
    }
    text = area.value;
    activate = start.checked;
    try {
      const created = await client.forkExperiment(experiment.id, text, activate);
      announce(created, `forked from experiment ${experiment.id}`);
      return;
    } catch (error) {
      problem = describeError(error);
    }
  }
}

/** Re-run a trial with its hyperparameters, or continue it from its latest checkpoint. */
export async function trialRunDialog(
  client: DeterminedClient,
  experiment: IExperiment,
  trial: ITrial,
  initial: 'rerun' | 'continue' = 'rerun'
): Promise<void> {
  const length = searcherLength(experiment.config);
  const continuable = canContinue(trial);
  let mode: 'rerun' | 'continue' = continuable ? initial : 'rerun';
  let lengthText = length ? String(length.value) : '';
  let problem = '';
  for (;;) {
    const radio = (value: 'rerun' | 'continue', label: string, disabled: boolean, note: string) => {
      const input = h('input', {
        props: {
          type: 'radio',
          name: 'jp-Det-trialRunMode',
          value,
          checked: mode === value,
          disabled
        },
        attrs: { 'data-mode': value }
      });
      return {
        input,
        node: h(
          'label',
          { class: `jp-Det-radio${disabled ? ' jp-mod-disabled' : ''}`, title: note },
          input,
          ` ${label}`,
          h('div', { class: 'jp-Det-hint' }, note)
        )
      };
    };
    const rerun = radio(
      'rerun',
      'Re-run with these hyperparameters',
      false,
      'A new single-trial experiment with the same model and hyperparameters, trained from scratch.'
    );
    const cont = radio(
      'continue',
      'Continue from its latest checkpoint',
      !continuable,
      continuable
        ? `The new trial starts from checkpoint ${trial.latest_checkpoint} (the weights carry over).`
        : 'This trial has no checkpoint to continue from.'
    );
    const lengthInput = h('input', {
      class: 'jp-Det-input jp-Det-maxLength',
      props: { type: 'text', value: lengthText, placeholder: 'the parent’s' },
      attrs: { 'aria-label': 'max_length', inputmode: 'numeric' }
    });
    const body = new Widget({
      node: h(
        'div',
        { class: 'jp-Det-dialogBody jp-Det-trialRunDialog' },
        problemNode(problem),
        rerun.node,
        cont.node,
        h(
          'label',
          { class: 'jp-Det-lengthField' },
          `max_length${length?.unit ? ` (${length.unit})` : ''}: `,
          lengthInput
        )
      )
    });
    const answer = await showDialog({
      title: `Trial ${trial.id}: a new experiment`,
      body,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Create' })]
    });
    if (!answer.button.accept) {
      return;
    }
    mode = cont.input.checked ? 'continue' : 'rerun';
    lengthText = lengthInput.value;
    const parsed = parseLength(lengthText);
    if (parsed !== null && typeof parsed === 'object') {
      problem = parsed.problem;
      continue;
    }
    try {
      const created = await client.experimentFromTrial(trial.id, mode, parsed);
      announce(
        created,
        mode === 'continue'
          ? `continues trial ${trial.id} from its checkpoint`
          : `trial ${trial.id}'s hyperparameters`
      );
      return;
    } catch (error) {
      problem = describeError(error);
    }
  }
}

const NEW_MODEL = '';

/** Register a checkpoint as the next version of a model (an existing one, or a new one). */
export async function registerDialog(client: DeterminedClient, uuid: string): Promise<void> {
  let names: string[];
  try {
    names = (await client.listModels()).filter(m => !m.archived).map(m => m.name);
  } catch (error) {
    Notification.error(`Register: cannot list the models: ${describeError(error)}`, {
      autoClose: false
    });
    return;
  }
  let choice = names.length ? names[0] : NEW_MODEL;
  let newName = '';
  let comment = '';
  let problem = '';
  for (;;) {
    const picker = h(
      'select',
      { class: 'jp-Det-select jp-Det-registerModel', attrs: { 'aria-label': 'Model' } },
      ...names.map(name =>
        h('option', { props: { value: name, selected: name === choice } }, name)
      ),
      h('option', { props: { value: NEW_MODEL, selected: choice === NEW_MODEL } }, 'New model…')
    );
    const nameInput = h('input', {
      class: 'jp-Det-input jp-Det-registerNewName',
      props: { type: 'text', value: newName, placeholder: 'new model name' },
      attrs: { 'aria-label': 'New model name' }
    });
    const commentInput = h('input', {
      class: 'jp-Det-input jp-Det-registerComment',
      props: { type: 'text', value: comment, placeholder: 'comment (optional)' },
      attrs: { 'aria-label': 'Comment' }
    });
    const syncName = () => {
      nameInput.hidden = picker.value !== NEW_MODEL;
    };
    picker.addEventListener('change', syncName);
    syncName();
    const body = new Widget({
      node: h(
        'div',
        { class: 'jp-Det-dialogBody jp-Det-registerDialog' },
        h('p', { class: 'jp-Det-mono' }, `checkpoint ${uuid}`),
        problemNode(problem),
        h('label', null, 'Model: ', picker),
        nameInput,
        commentInput,
        h(
          'div',
          { class: 'jp-Det-hint' },
          'A registered checkpoint is kept: garbage collection and deletion leave it alone.'
        )
      )
    });
    const answer = await showDialog({
      title: 'Register in the model registry',
      body,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Register' })]
    });
    if (!answer.button.accept) {
      return;
    }
    choice = picker.value;
    newName = nameInput.value;
    comment = commentInput.value;
    let model = choice;
    if (choice === NEW_MODEL) {
      problem = modelNameProblem(newName, names);
      if (problem) {
        continue;
      }
      model = newName.trim();
    }
    try {
      if (choice === NEW_MODEL) {
        await client.createModel(model);
        names = [...names, model];
        choice = model; // a retry registers into the model just made
      }
      const version = await client.registerVersion(model, uuid, comment.trim());
      Notification.success(`Registered as ${model} version ${version.version}`, {
        autoClose: 6000
      });
      return;
    } catch (error) {
      problem = describeError(error);
    }
  }
}

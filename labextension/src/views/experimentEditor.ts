/**
 * The sidebar's editor of one experiment's name, labels and notes (PATCH /experiments/{id}).
 * Shown above the table by a row's ✎ button; Save sends only what changed.
 */
import { DeterminedClient, describeError } from '../api/client';
import { errorBox, h, replaceChildren } from '../dom';
import { labelsOf, parseLabels } from '../model/experimentTable';
import type { IExperiment } from '../api/types';

export class ExperimentEditor {
  readonly node: HTMLElement;
  private _id: number | null = null;
  private _title: HTMLElement;
  private _name: HTMLInputElement;
  private _labels: HTMLInputElement;
  private _notes: HTMLTextAreaElement;
  private _error: HTMLElement;
  private _save: HTMLButtonElement;
  private _original: IExperiment | null = null;

  constructor(
    private readonly _client: DeterminedClient,
    private readonly _saved: (experiment: IExperiment) => void
  ) {
    this._title = h('div', { class: 'jp-Det-editTitle' });
    this._name = h('input', {
      class: 'jp-Det-input jp-Det-editName',
      props: { type: 'text', placeholder: 'Name' }
    });
    this._labels = h('input', {
      class: 'jp-Det-input jp-Det-editLabels',
      props: { type: 'text', placeholder: 'Labels, separated by commas' }
    });
    this._notes = h('textarea', {
      class: 'jp-Det-input jp-Det-editNotes',
      props: { rows: 3, placeholder: 'Notes' }
    });
    this._error = h('div', { class: 'jp-Det-editError' });
    this._save = h(
      'button',
      {
        class: 'jp-Det-button jp-mod-accept jp-Det-editSave',
        on: { click: () => void this.save() }
      },
      'Save'
    );
    const cancel = h(
      'button',
      { class: 'jp-Det-button jp-Det-editCancel', on: { click: () => this.close() } },
      'Cancel'
    );
    this.node = h(
      'form',
      {
        class: 'jp-Det-editPanel',
        attrs: { hidden: '' },
        on: {
          submit: (event: SubmitEvent) => {
            event.preventDefault();
            void this.save();
          },
          keydown: (event: KeyboardEvent) => {
            if (event.key === 'Escape') {
              this.close();
            }
          }
        }
      },
      this._title,
      h('label', { class: 'jp-Det-editField' }, 'Name', this._name),
      h('label', { class: 'jp-Det-editField' }, 'Labels', this._labels),
      h('label', { class: 'jp-Det-editField' }, 'Notes', this._notes),
      this._error,
      h('div', { class: 'jp-Det-editButtons' }, cancel, this._save)
    );
  }

  /** The experiment being edited, or null. */
  get experimentId(): number | null {
    return this._id;
  }

  open(experiment: IExperiment): void {
    this._id = experiment.id;
    this._original = experiment;
    this.node.dataset.experimentId = String(experiment.id);
    this._title.textContent = `Edit experiment ${experiment.id}`;
    this._name.value = experiment.name ?? '';
    this._labels.value = labelsOf(experiment).join(', ');
    this._notes.value = typeof experiment.notes === 'string' ? experiment.notes : '';
    replaceChildren(this._error);
    this.node.hidden = false;
    this._name.focus();
  }

  close(): void {
    this._id = null;
    this._original = null;
    this.node.hidden = true;
  }

  /** Send what changed; the panel closes once the master accepted it. */
  async save(): Promise<void> {
    const original = this._original;
    if (this._id === null || !original) {
      return;
    }
    const fields: { name?: string; labels?: string[]; notes?: string } = {};
    const name = this._name.value.trim();
    if (!name) {
      replaceChildren(this._error, errorBox('The name cannot be empty: type a name, or Cancel.'));
      return;
    }
    if (name !== original.name) {
      fields.name = name;
    }
    const labels = parseLabels(this._labels.value);
    if (labels.join('\n') !== labelsOf(original).join('\n')) {
      fields.labels = labels;
    }
    const notes = this._notes.value;
    if (notes !== (original.notes ?? '')) {
      fields.notes = notes;
    }
    if (!Object.keys(fields).length) {
      this.close();
      return;
    }
    this._save.disabled = true;
    try {
      const updated = await this._client.patchExperiment(this._id, fields);
      this._saved(updated);
      this.close();
    } catch (error) {
      replaceChildren(
        this._error,
        errorBox(`Cannot save experiment ${this._id}: ${describeError(error)}`)
      );
    } finally {
      this._save.disabled = false;
    }
  }
}

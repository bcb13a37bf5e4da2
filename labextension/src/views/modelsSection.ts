/**
 * The sidebar's "Models" section: the model registry (docs/sidebar.md). Each model shows its
 * number of versions and labels; opening it lists its versions newest first, each with the
 * checkpoint it names, that checkpoint's experiment, trial and step, and the validation
 * metrics at that step. A click on a version opens its experiment. Live: `model` events
 * update the list (and reload the versions of an opened model), `checkpoint` events the
 * versions naming that checkpoint; without the event stream, the hub's poll reloads.
 */
import { DeterminedClient, describeError } from '../api/client';
import { EventHub } from '../api/events';
import { errorBox, h, replaceChildren } from '../dom';
import { ModelRegistryModel, summarizeVersion } from '../model/modelRegistry';
import { oncePerFrame, singleFlight } from '../model/schedule';
import type { ICheckpoint, IModel, IModelVersion, INotebookOrigin, ModelEvent } from '../api/types';

export const EMPTY_MODELS_TEXT = 'No models yet.';
export const EMPTY_MODELS_HINT =
  'Register a checkpoint with `det model register-version NAME UUID`, or model.register_version(uuid) in the Python SDK.';

export class ModelsSection {
  readonly node: HTMLElement;
  readonly model = new ModelRegistryModel();
  private _body: HTMLElement;
  private _count: HTMLElement;
  private _message: HTMLElement;
  private _unsubscribe: (() => void) | null = null;

  constructor(
    private readonly _client: DeterminedClient,
    private readonly _hub: EventHub,
    private readonly _openExperiment: (id: number) => void,
    /** "Use": insert a cell that loads the version's checkpoint; none: no such buttons. */
    private readonly _useInNotebook?: (
      uuid: string,
      origin?: INotebookOrigin | null
    ) => Promise<void>
  ) {
    this._count = h('span', { class: 'jp-Det-models-count' });
    this._message = h('div', { class: 'jp-Det-message' });
    this._body = h('ul', { class: 'jp-Det-modelList' });
    this.node = h(
      'div',
      { class: 'jp-Det-models', attrs: { 'data-loaded': 'false' } },
      h('div', { class: 'jp-Det-models-title' }, 'Models', this._count),
      this._message,
      this._body
    );
    this.model.changed.connect(() => this._queueRender());
  }

  /** Start listening and load the list (idempotent). */
  start(): Promise<void> {
    if (!this._unsubscribe) {
      this._unsubscribe = this._hub.subscribe({
        types: ['model', 'checkpoint'],
        onEvent: (type, payload) => {
          if (type === 'model') {
            const event = payload as ModelEvent;
            if (this.model.applyEvent(event)) {
              void this._loadVersions(event.id);
            }
          } else {
            this.model.applyCheckpoint(payload as ICheckpoint);
          }
        },
        onPoll: () => void this.refresh()
      });
    }
    return this.refresh();
  }

  /** Reload the models (a call while they load waits for that load). */
  readonly refresh = singleFlight(async () => {
    try {
      const stale = this.model.replaceAll(await this._client.listModels());
      replaceChildren(this._message);
      await Promise.all(stale.map(id => this._loadVersions(id)));
    } catch (error) {
      replaceChildren(this._message, errorBox(`Cannot load models: ${describeError(error)}`));
    }
  });

  private async _loadVersions(modelId: number): Promise<void> {
    try {
      this.model.setVersions(modelId, await this._client.listModelVersions(modelId));
    } catch (error) {
      replaceChildren(
        this._message,
        errorBox(`Cannot load the versions of model ${modelId}: ${describeError(error)}`)
      );
    }
  }

  private _toggle(modelId: number): void {
    if (this.model.toggle(modelId)) {
      void this._loadVersions(modelId);
    }
  }

  private readonly _queueRender = oncePerFrame(() => this.render());

  /** Render the section now. */
  render(): void {
    const models = this.model.models;
    this.node.dataset.loaded = String(this.model.loaded);
    this._count.textContent = this.model.loaded ? ` (${models.length})` : '';
    if (this.model.loaded && !models.length) {
      replaceChildren(
        this._body,
        h(
          'li',
          { class: 'jp-Det-models-empty' },
          h('div', null, EMPTY_MODELS_TEXT),
          h('div', { class: 'jp-Det-hint' }, EMPTY_MODELS_HINT)
        )
      );
      return;
    }
    replaceChildren(this._body, ...models.map(m => this._modelRow(m)));
  }

  private _modelRow(model: IModel): HTMLElement {
    const open = this.model.isOpen(model.id);
    const head = h(
      'div',
      {
        class: 'jp-Det-modelRow-head',
        title: model.description || `Model ${model.name}`,
        attrs: { role: 'button', tabindex: '0', 'aria-expanded': String(open) },
        on: {
          click: () => this._toggle(model.id),
          keydown: (event: KeyboardEvent) => {
            if (event.key === 'Enter') {
              this._toggle(model.id);
            }
          }
        }
      },
      h('span', { class: 'jp-Det-modelCaret' }, open ? '▾' : '▸'),
      h('span', { class: 'jp-Det-modelName' }, model.name),
      model.archived ? h('span', { class: 'jp-Det-modelArchived' }, 'archived') : null,
      h(
        'span',
        { class: 'jp-Det-modelVersions' },
        `${model.num_versions} version${model.num_versions === 1 ? '' : 's'}`
      )
    );
    const labels = model.labels.length
      ? h(
          'div',
          { class: 'jp-Det-modelLabels' },
          ...model.labels.map(label => h('span', { class: 'jp-Det-modelLabel' }, label))
        )
      : null;
    return h(
      'li',
      {
        class: 'jp-Det-modelRow',
        attrs: { 'data-model-id': String(model.id), 'data-model-name': model.name }
      },
      head,
      labels,
      open ? this._versionList(this.model.versions(model.id)) : null
    );
  }

  private _versionList(versions: IModelVersion[] | undefined): HTMLElement {
    if (!versions) {
      return h('div', { class: 'jp-Det-hint' }, 'Loading versions…');
    }
    if (!versions.length) {
      return h('div', { class: 'jp-Det-hint' }, 'No versions yet.');
    }
    return h('ul', { class: 'jp-Det-versionList' }, ...versions.map(v => this._versionRow(v)));
  }

  private _versionRow(version: IModelVersion): HTMLElement {
    const summary = summarizeVersion(version);
    const experimentId = summary.experimentId;
    return h(
      'li',
      {
        class: 'jp-Det-versionRow',
        title:
          experimentId === null
            ? version.checkpoint_uuid
            : `${version.checkpoint_uuid}\nOpen experiment ${experimentId}`,
        attrs: {
          'data-version': String(version.version),
          'data-checkpoint-uuid': version.checkpoint_uuid,
          tabindex: '0'
        },
        on: {
          click: () => {
            if (experimentId !== null) {
              this._openExperiment(experimentId);
            }
          }
        }
      },
      h('div', { class: 'jp-Det-versionTitle' }, summary.title, this._useButton(version)),
      h('div', { class: 'jp-Det-mono jp-Det-versionCheckpoint' }, summary.checkpoint),
      h('div', { class: 'jp-Det-versionSource' }, summary.source),
      summary.metrics ? h('div', { class: 'jp-Det-versionMetrics' }, summary.metrics) : null
    );
  }

  /** "Use": a cell loading the version's checkpoint (while its files exist). */
  private _useButton(version: IModelVersion): HTMLElement | null {
    const use = this._useInNotebook;
    if (!use || version.checkpoint?.state !== 'COMPLETED') {
      return null;
    }
    const button = h(
      'button',
      {
        class: 'jp-Det-button jp-Det-versionUse',
        title: `Insert a cell into a notebook that loads ${version.model_name} version ${version.version} (its checkpoint)`,
        attrs: { type: 'button', 'data-uuid': version.checkpoint_uuid }
      },
      'Use'
    );
    button.addEventListener('click', event => {
      event.stopPropagation(); // the row's click opens the experiment
      button.disabled = true;
      void use(version.checkpoint_uuid, null).finally(() => {
        button.disabled = false;
      });
    });
    return button;
  }

  dispose(): void {
    this._unsubscribe?.();
  }
}

/**
 * State of the sidebar's Models section: the registry's models and, for the models a person
 * opened, their versions. Fed by `GET /models`, `GET /models/{id}/versions` and `model` /
 * `checkpoint` events; no DOM, so the unit tests drive it directly.
 */
import { Emitter } from './model';
import { formatMetric } from './format';
import type { ICheckpoint, IModel, IModelVersion, ModelEvent } from '../api/types';

/** What a version's row says about the checkpoint it names. */
export interface IVersionSummary {
  /** `v2 · best` (the version's name after its number, when it has one). */
  title: string;
  /** `checkpoint 3f2a9c1e…` (the first 8 characters of the uuid). */
  checkpoint: string;
  /** `experiment 4 · trial 7 · step 300`, or why it is unknown. */
  source: string;
  /** `loss 0.25, acc 0.9`: the validation at the checkpoint's step, or ''. */
  metrics: string;
  /** The experiment to open, when the checkpoint's record is known. */
  experimentId: number | null;
}

/** The row text of one version (pure: the unit tests check it). */
export function summarizeVersion(version: IModelVersion): IVersionSummary {
  const checkpoint = version.checkpoint;
  const title = version.name ? `v${version.version} · ${version.name}` : `v${version.version}`;
  const short = `checkpoint ${version.checkpoint_uuid.slice(0, 8)}…`;
  if (!checkpoint) {
    return {
      title,
      checkpoint: short,
      source: 'checkpoint record not found',
      metrics: '',
      experimentId: null
    };
  }
  const state = checkpoint.state === 'COMPLETED' ? '' : ` (${checkpoint.state})`;
  const metrics = Object.entries(checkpoint.validation_metrics ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, value]) => `${name} ${formatMetric(value)}`)
    .join(', ');
  return {
    title,
    checkpoint: short + state,
    source: `experiment ${checkpoint.experiment_id} · trial ${checkpoint.trial_id} · step ${checkpoint.steps_completed}`,
    metrics,
    experimentId: checkpoint.experiment_id
  };
}

function isDeleted(event: ModelEvent): event is { id: number; name: string; deleted: true } {
  return (event as { deleted?: boolean }).deleted === true;
}

/** The models of the registry and the versions of the opened ones. */
export class ModelRegistryModel {
  readonly changed = new Emitter<void>();
  private _models = new Map<number, IModel>();
  private _versions = new Map<number, IModelVersion[]>();
  private _open = new Set<number>();
  private _loaded = false;

  get loaded(): boolean {
    return this._loaded;
  }

  /** The models by name (as the master sorts them: as SQLite compares text). */
  get models(): IModel[] {
    return [...this._models.values()].sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : a.id - b.id
    );
  }

  isOpen(modelId: number): boolean {
    return this._open.has(modelId);
  }

  /** The versions of an opened model, newest first (undefined: not loaded yet). */
  versions(modelId: number): IModelVersion[] | undefined {
    return this._versions.get(modelId);
  }

  /** Open or close a model; returns whether its versions need loading. */
  toggle(modelId: number): boolean {
    if (this._open.delete(modelId)) {
      this.changed.emit();
      return false;
    }
    this._open.add(modelId);
    this.changed.emit();
    return !this._versions.has(modelId);
  }

  /** A fresh list answer; the opened models that changed are returned (reload their versions). */
  replaceAll(models: IModel[]): number[] {
    const stale: number[] = [];
    const next = new Map<number, IModel>();
    for (const model of models) {
      const known = this._models.get(model.id);
      if (this._open.has(model.id) && known?.last_updated_time !== model.last_updated_time) {
        stale.push(model.id);
      }
      next.set(model.id, model);
    }
    for (const id of [...this._open]) {
      if (!next.has(id)) {
        this._open.delete(id);
        this._versions.delete(id);
      }
    }
    this._models = next;
    this._loaded = true;
    this.changed.emit();
    return stale;
  }

  /** A `model` event; returns true when the model is open and its versions need reloading. */
  applyEvent(event: ModelEvent): boolean {
    if (isDeleted(event)) {
      this._models.delete(event.id);
      this._versions.delete(event.id);
      this._open.delete(event.id);
      this.changed.emit();
      return false;
    }
    const known = this._models.get(event.id);
    this._models.set(event.id, event);
    this.changed.emit();
    return this._open.has(event.id) && known?.last_updated_time !== event.last_updated_time;
  }

  setVersions(modelId: number, versions: IModelVersion[]): void {
    this._versions.set(modelId, versions);
    this.changed.emit();
  }

  /** A `checkpoint` event: versions naming that checkpoint show its new state and metadata. */
  applyCheckpoint(checkpoint: ICheckpoint): void {
    let changed = false;
    for (const [modelId, versions] of this._versions) {
      if (versions.some(v => v.checkpoint_uuid === checkpoint.uuid)) {
        this._versions.set(
          modelId,
          versions.map(v => (v.checkpoint_uuid === checkpoint.uuid ? { ...v, checkpoint } : v))
        );
        changed = true;
      }
    }
    if (changed) {
      this.changed.emit();
    }
  }
}

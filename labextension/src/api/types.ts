/**
 * The objects of the master's REST API (docs/rest-api.md), as the frontend reads them.
 *
 * Each extends the interface generated from the master's OpenAPI document
 * (`contract.generated.ts`, written by scripts/gen_ts_contract.py): a field redeclared here may
 * only narrow what the API documents (optional → present, a wider object → the fields read), so
 * the compiler rejects a field the API documents differently. Fields the API serves but does
 * not document yet are marked as such.
 */
import type {
  ApiCheckpoint,
  ApiExperiment,
  ApiLog,
  ApiMetric,
  ApiModel,
  ApiModelVersion,
  ApiSlot,
  ApiTensorBoard,
  ApiTrial
} from './contract.generated';

export type ExperimentState = ApiExperiment['state'];

export interface ISearcherSummary {
  name: string;
  metric: string;
  smaller_is_better: boolean;
}

/** Where an experiment was submitted from (its `notebook` field): the notebook's path as its
 * kernel saw it (absolute or server-relative) and the ids of the cells exported, the submitting
 * cell last for a `%%det_submit` cell. */
export type INotebookOrigin = {
  path?: string;
  cell_ids?: string[];
};

export interface IExperiment extends Omit<ApiExperiment, 'state' | 'progress'> {
  name: string;
  /** The documented states, and DELETED in the event of a deletion. */
  state: ExperimentState | string;
  archived: boolean;
  /** null before the searcher knows how long the search is. */
  progress: number | null;
  start_time: string;
  end_time: string | null;
  searcher: ISearcherSummary;
  num_trials: number;
  best_validation: number | null;
  notebook?: INotebookOrigin | null;
  /** Served, not in the OpenAPI document: trains in a Jupyter kernel (core_v2, unmanaged). */
  unmanaged?: boolean;
  /** Served in a deletion event only (state DELETED): the experiment is gone. */
  deleted?: boolean;
}

/** GET /trials/{id}/kernel: where a kernel trial's kernel is (docs/kernels.md). */
export interface ITrialKernel {
  trial_id: number;
  allocation_id: string;
  state: string;
  /** True when the run failed and its kernel is kept for post-mortem. */
  post_mortem: boolean;
  /** The id in the hosting Jupyter server's kernel manager (what a console connects to). */
  jupyter_kernel_id?: string;
  kernel_spec?: string;
}

export interface IMetricSnapshot {
  steps_completed: number;
  metrics: Record<string, unknown>;
  report_time: string;
}

export interface ITrial extends Omit<ApiTrial, 'state'> {
  /** The documented states; compared with plain strings throughout the views. */
  state: ApiTrial['state'] | string;
  hparams: Record<string, unknown>;
  restarts: number;
  steps_completed: number;
  start_time: string;
  end_time: string | null;
  latest_training?: IMetricSnapshot | null;
  latest_validation?: IMetricSnapshot | null;
  best_validation?: IMetricSnapshot | null;
}

export interface IMetricReport extends ApiMetric {
  report_time: string;
}

export interface ILogLine extends Omit<ApiLog, 'stream'> {
  rank: number | null;
  stream: ApiLog['stream'] | string;
  time: string;
}

export interface ICheckpoint extends ApiCheckpoint {
  steps_completed: number;
  resources?: Record<string, number>;
  report_time: string;
}

/** The "Use in notebook" cell of a checkpoint (GET checkpoints/{uuid}/snippet). */
export interface ICheckpointSnippet {
  /** The loader: from the framework and format the checkpoint's metadata records. */
  kind: 'pytorch' | 'keras' | 'estimator' | 'core';
  /** Python source of the cell. */
  code: string;
}

/** A TensorBoard the master runs on trials' metrics (GET /tensorboards/{id}). */
export type ITensorBoard = ApiTensorBoard;

// A type, not an interface: the API documents a slot's gpu as a plain object.
export type IGpu = {
  index: number;
  uuid: string;
  name: string;
  memory_total: number;
  memory_used: number;
  utilization: number;
};

export interface ISlot extends Omit<ApiSlot, 'type'> {
  type: ApiSlot['type'] | string;
  gpu: IGpu | null;
  allocation_id: string | null;
  trial_id: number | null;
}

export interface IResources {
  slots: ISlot[];
  gpus: IGpu[];
  /** resource_manager ray only: the master's connection to its Ray cluster. */
  cluster?: IClusterStatus;
}

/** The master's Ray connection (`cluster` of `GET /resources` and `GET /master`). */
export interface IClusterStatus {
  resource_manager: string;
  state: 'connecting' | 'connected' | 'waiting';
  message: string;
  since: string;
  address: string | null;
  nodes: {
    node_id: string;
    address: string | null;
    alive: boolean;
    pool: string | null;
    gpus: number;
    cpus: number;
  }[];
}

/** A model of the registry (`GET /models`). */
export interface IModel extends ApiModel {
  description: string;
  metadata: Record<string, unknown>;
  labels: string[];
  archived: boolean;
  creation_time: string;
  last_updated_time: string;
  num_versions: number;
}

/** One version of a model: the checkpoint it names (`GET /models/{id}/versions`). */
export interface IModelVersion extends ApiModelVersion {
  model_name: string;
  /** null only when the master lost the checkpoint's record. */
  checkpoint: ICheckpoint | null;
  name: string;
  comment: string;
  notes: string;
  metadata: Record<string, unknown>;
  labels: string[];
  creation_time: string;
  last_updated_time: string;
}

/** The payload of a `model` event: the model, or `{id, name, deleted: true}`. */
export type ModelEvent = IModel | { id: number; name: string; deleted: true };

/** The event types of `GET /events`. */
export type EventType = 'experiment' | 'trial' | 'metric' | 'log' | 'checkpoint' | 'model';

/**
 * The objects of the master's REST API (docs/rest-api.md), as the frontend reads them.
 */

export type ExperimentState =
  | 'ACTIVE'
  | 'PAUSED'
  | 'STOPPING_CANCELED'
  | 'STOPPING_COMPLETED'
  | 'STOPPING_ERROR'
  | 'COMPLETED'
  | 'CANCELED'
  | 'ERROR';

export interface ISearcherSummary {
  name: string;
  metric: string;
  smaller_is_better: boolean;
}

export interface IExperiment {
  id: number;
  name: string;
  description?: string;
  labels?: string[];
  state: ExperimentState | string;
  archived: boolean;
  progress: number | null;
  start_time: string;
  end_time: string | null;
  searcher: ISearcherSummary;
  num_trials: number;
  best_validation: number | null;
  context_hash?: string | null;
  notebook?: { path?: string; cell_ids?: string[] } | null;
  parent_id?: number | null;
  config?: Record<string, unknown>;
  /** Trains in a Jupyter kernel (core_v2, unmanaged): the master runs nothing for it. */
  unmanaged?: boolean;
  /** Only in the event of its deletion (state DELETED): the experiment is gone. */
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

export interface ITrial {
  id: number;
  experiment_id: number;
  request_id?: number;
  state: string;
  hparams: Record<string, unknown>;
  seed?: number;
  restarts: number;
  run_id?: number;
  steps_completed: number;
  progress?: number | null;
  runner_state?: string;
  start_time: string;
  end_time: string | null;
  exit_code?: number | null;
  /** Why the trial ended, in words (e.g. "killed by SIGKILL: the user killed the experiment"). */
  exit_summary?: string | null;
  /** What an ACTIVE trial is doing: holding slots (RUNNING) or waiting for them (QUEUED). */
  run_state?: 'QUEUED' | 'RUNNING' | null;
  allocation_id?: string | null;
  slot_ids?: number[];
  latest_checkpoint?: string | null;
  latest_training?: IMetricSnapshot | null;
  latest_validation?: IMetricSnapshot | null;
  best_validation?: IMetricSnapshot | null;
  searcher_metric?: number | null;
}

export interface IMetricReport {
  id: number;
  trial_id: number;
  trial_run_id?: number;
  group: string;
  steps_completed: number;
  metrics: Record<string, unknown>;
  report_time: string;
}

export interface ILogLine {
  id: number;
  trial_id: number;
  rank: number | null;
  stream: string;
  time: string;
  line: string;
}

export interface ICheckpoint {
  uuid: string;
  trial_id: number;
  experiment_id: number;
  allocation_id?: string | null;
  steps_completed: number;
  metadata?: Record<string, unknown>;
  resources?: Record<string, number>;
  state: string;
  report_time: string;
  path?: string;
  validation_metrics?: Record<string, unknown> | null;
}

/** The "Use in notebook" cell of a checkpoint (GET checkpoints/{uuid}/snippet). */
export interface ICheckpointSnippet {
  /** The loader: from the framework and format the checkpoint's metadata records. */
  kind: 'pytorch' | 'keras' | 'estimator' | 'core';
  /** Python source of the cell. */
  code: string;
}

/** A TensorBoard the master runs on trials' metrics (GET /tensorboards/{id}). */
export interface ITensorBoard {
  id: string;
  state: 'STATE_STARTING' | 'STATE_RUNNING' | 'STATE_TERMINATED';
  experimentIds: number[];
  trialIds: number[];
  serviceAddress: string;
  port?: number;
  registeredTime?: string;
  error?: string | null;
}

export interface IGpu {
  index: number;
  uuid: string;
  name: string;
  memory_total: number;
  memory_used: number;
  utilization: number;
}

export interface ISlot {
  id: number;
  type: 'cpu' | 'gpu' | string;
  gpu: IGpu | null;
  allocation_id: string | null;
  trial_id: number | null;
}

export interface IResources {
  slots: ISlot[];
  gpus: IGpu[];
}

/** A model of the registry (`GET /models`). */
export interface IModel {
  id: number;
  name: string;
  description: string;
  notes?: string;
  metadata: Record<string, unknown>;
  labels: string[];
  archived: boolean;
  creation_time: string;
  last_updated_time: string;
  num_versions: number;
}

/** One version of a model: the checkpoint it names (`GET /models/{id}/versions`). */
export interface IModelVersion {
  id: number;
  model_id: number;
  model_name: string;
  version: number;
  checkpoint_uuid: string;
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

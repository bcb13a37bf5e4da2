/**
 * The master's REST API as served by the jupyter_determined server extension under
 * `<base_url>determined/api/v1/` (the live event feed is events.ts).
 *
 * Every request goes through `ServerConnection.makeRequest`, which adds Jupyter's token and
 * XSRF header; API errors become `DeterminedApiError` whose message is the server's one line.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type {
  ICheckpoint,
  ICheckpointSnippet,
  IExperiment,
  ILogLine,
  IMetricReport,
  IModel,
  IModelVersion,
  IResources,
  ITensorBoard,
  ITrial,
  ITrialKernel
} from './types';

import { API_PATH } from './contract.generated';
import { parseApiJson } from './nonFinite';

export { API_PATH };

/** An API answer that was not 2xx, with the server's readable message. */
export class DeterminedApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly errors: string[] = []
  ) {
    super(message);
    this.name = 'DeterminedApiError';
  }

  /** The message plus each listed error, one per line (config errors list every problem). */
  get details(): string {
    return [this.message, ...this.errors].join('\n');
  }
}

/**
 * The master is shutting down (its 503 "the master is stopping"): not an error to show in red
 * wherever a request failed, but one note — its trials checkpoint and resume on the next start.
 */
export function isMasterStopping(error: unknown): boolean {
  return (
    error instanceof DeterminedApiError &&
    error.status === 503 &&
    error.message.startsWith('the master is stopping')
  );
}

/** The one note shown while the master stops (instead of an error box per failed request). */
export const MASTER_STOPPING_NOTE =
  'Master stopping: its running trials were asked to save a checkpoint and exit; they resume ' +
  'when the Jupyter server starts again.';

/** Turn any failure into one readable line (never an empty string, never "[object Object]"). */
export function describeError(error: unknown): string {
  if (error instanceof DeterminedApiError) {
    return error.details;
  }
  if (error instanceof ServerConnection.NetworkError) {
    return `cannot reach the Jupyter server (${error.message}); is it still running?`;
  }
  if (error instanceof Error) {
    return error.message || error.name;
  }
  return String(error);
}

async function errorFromResponse(response: Response, what: string): Promise<DeterminedApiError> {
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text);
    if (body && typeof body.message === 'string') {
      const errors = Array.isArray(body.errors) ? body.errors.map(String) : [];
      return new DeterminedApiError(body.message, response.status, errors);
    }
  } catch {
    // not JSON: a proxy page or a server without the extension; describe it below
  }
  if (response.status === 404 && !text.includes('"message"')) {
    return new DeterminedApiError(
      `${what}: the Determined API is not served here (404); is the jupyter_determined server extension enabled? (jupyter server extension list)`,
      404
    );
  }
  const snippet = text.replace(/\s+/g, ' ').slice(0, 200);
  return new DeterminedApiError(
    `${what}: HTTP ${response.status} ${response.statusText}${snippet ? ` — ${snippet}` : ''}`,
    response.status
  );
}

export type Query = Record<string, string | number | boolean | null | undefined>;

function queryString(query?: Query): string {
  if (!query) {
    return '';
  }
  const parts: string[] = [];
  for (const [key, value] of Object.entries(query)) {
    if (value !== null && value !== undefined && value !== '') {
      parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`);
    }
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

/** Which reports of an experiment's metrics to fetch (bounded reads for large experiments). */
export interface IMetricsSample {
  /** Only these trials (at most 1000). */
  trialIds?: number[];
  /** Per trial and group, at most this many reports (>= 2): first, last, evenly spaced. */
  maxDatapoints?: number;
}

export interface ITrialsPageQuery {
  limit?: number;
  offset?: number;
  /** 'id' (default), '-id', or 'best' (best searcher metric first). */
  orderBy?: 'id' | '-id' | 'best';
}

/** A typed client of the API; one per application. */
export class DeterminedClient {
  readonly settings: ServerConnection.ISettings;

  constructor(settings?: ServerConnection.ISettings) {
    this.settings = settings ?? ServerConnection.makeSettings();
  }

  url(path: string, query?: Query): string {
    return URLExt.join(this.settings.baseUrl, API_PATH, path) + queryString(query);
  }

  async request<T>(
    method: string,
    path: string,
    options: { query?: Query; body?: unknown } = {}
  ): Promise<T> {
    const init: RequestInit = { method };
    if (options.body !== undefined) {
      init.body = JSON.stringify(options.body);
      init.headers = { 'Content-Type': 'application/json' };
    }
    const response = await ServerConnection.makeRequest(
      this.url(path, options.query),
      init,
      this.settings
    );
    if (!response.ok) {
      throw await errorFromResponse(response, `${method} ${path}`);
    }
    const text = await response.text();
    if (!text) {
      return {} as T;
    }
    try {
      // Strict JSON: a diverged metric comes as "NaN"/"Infinity" and is read back as a number.
      return parseApiJson(text) as T;
    } catch (error) {
      throw new DeterminedApiError(
        `${method} ${path}: the answer is not JSON (${String(error)})`,
        response.status
      );
    }
  }

  async listExperiments(): Promise<IExperiment[]> {
    return (await this.request<{ experiments: IExperiment[] }>('GET', 'experiments')).experiments;
  }

  async getExperiment(id: number): Promise<{ experiment: IExperiment; trials: ITrial[] }> {
    return this.request('GET', `experiments/${id}`);
  }

  async listTrials(experimentId: number): Promise<ITrial[]> {
    return (await this.request<{ trials: ITrial[] }>('GET', `experiments/${experimentId}/trials`))
      .trials;
  }

  /** One page of an experiment's trials (with their latest/best metrics) and how many there are. */
  async trialsPage(
    experimentId: number,
    page: ITrialsPageQuery = {}
  ): Promise<{ trials: ITrial[]; total: number }> {
    const query = { limit: page.limit, offset: page.offset, order_by: page.orderBy };
    return this.request('GET', `experiments/${experimentId}/trials`, { query });
  }

  async listCheckpoints(experimentId: number): Promise<ICheckpoint[]> {
    return (
      await this.request<{ checkpoints: ICheckpoint[] }>(
        'GET',
        `experiments/${experimentId}/checkpoints`
      )
    ).checkpoints;
  }

  /** The notebook cell that downloads and loads a checkpoint ("Use in notebook"). */
  async checkpointSnippet(uuid: string): Promise<ICheckpointSnippet> {
    return this.request('GET', `checkpoints/${encodeURIComponent(uuid)}/snippet`);
  }

  /**
   * Metric reports of an experiment after `afterId` (all groups when group is empty): of every
   * trial, or only of `trialIds`; each (trial, group) series downsampled to `maxDatapoints`
   * (its first, last and evenly spaced reports) when given.
   */
  async experimentMetrics(
    experimentId: number,
    group = '',
    afterId = 0,
    sample: IMetricsSample = {}
  ): Promise<IMetricReport[]> {
    if (sample.trialIds && !sample.trialIds.length) {
      return []; // no trial asked for (an empty trial_ids would mean every trial)
    }
    const query: Query = { group, after_id: afterId, max_datapoints: sample.maxDatapoints };
    if (sample.trialIds) {
      query.trial_ids = sample.trialIds.join(',');
    }
    return (
      await this.request<{ metrics: IMetricReport[] }>(
        'GET',
        `experiments/${experimentId}/metrics`,
        { query }
      )
    ).metrics;
  }

  async trialLogs(
    trialId: number,
    query: {
      after_id?: number;
      tail?: number;
      limit?: number;
      rank?: number | null;
      stream?: string;
    } = {}
  ): Promise<ILogLine[]> {
    return (await this.request<{ logs: ILogLine[] }>('GET', `trials/${trialId}/logs`, { query }))
      .logs;
  }

  /** Every trial's log lines of an experiment (each with its trial_id), ascending id;
   * `search`: only lines containing it (any case), over the whole history. */
  async experimentLogs(
    experimentId: number,
    query: { after_id?: number; tail?: number; limit?: number; search?: string } = {}
  ): Promise<ILogLine[]> {
    const given: Query = {};
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== '') {
        given[key] = value;
      }
    }
    return (
      await this.request<{ logs: ILogLine[] }>('GET', `experiments/${experimentId}/logs`, {
        query: given
      })
    ).logs;
  }

  async experimentAction(experimentId: number, action: string): Promise<IExperiment> {
    return (
      await this.request<{ experiment: IExperiment }>(
        'POST',
        `experiments/${experimentId}/${action}`
      )
    ).experiment;
  }

  /**
   * Fork an experiment (Determined's CreateExperiment with `parentId`): a new experiment from
   * `config` (YAML/JSON text or an object) and the parent's model definition and notebook.
   */
  async forkExperiment(
    parentId: number,
    config: string | Record<string, unknown>,
    activate = true
  ): Promise<IExperiment> {
    const body = { config, parent_id: parentId, activate };
    return (await this.request<{ experiment: IExperiment }>('POST', 'experiments', { body }))
      .experiment;
  }

  /**
   * A new experiment from one trial: `rerun` with its hyperparameters from scratch, or
   * `continue` from its latest checkpoint; `maxLength` in the parent's unit (null: the parent's).
   */
  async experimentFromTrial(
    trialId: number,
    mode: 'rerun' | 'continue',
    maxLength: number | null,
    activate = true
  ): Promise<IExperiment> {
    const body: Record<string, unknown> = { activate };
    if (maxLength !== null) {
      body.max_length = maxLength;
    }
    return (
      await this.request<{ experiment: IExperiment }>('POST', `trials/${trialId}/${mode}`, {
        body
      })
    ).experiment;
  }

  /** Create a model in the registry (409 when the name is taken, in any case). */
  async createModel(name: string, description = ''): Promise<IModel> {
    return (
      await this.request<{ model: IModel }>('POST', 'models', { body: { name, description } })
    ).model;
  }

  /** Register a checkpoint as the model's next version. */
  async registerVersion(
    model: string | number,
    checkpointUuid: string,
    comment = ''
  ): Promise<IModelVersion> {
    const path = `models/${encodeURIComponent(String(model))}/versions`;
    const body = { checkpoint_uuid: checkpointUuid, comment };
    return (await this.request<{ model_version: IModelVersion }>('POST', path, { body }))
      .model_version;
  }

  /** Change an experiment's name, description, notes or labels (those given; PATCH). */
  async patchExperiment(
    experimentId: number,
    fields: { name?: string; description?: string; notes?: string; labels?: string[] }
  ): Promise<IExperiment> {
    return (
      await this.request<{ experiment: IExperiment }>('PATCH', `experiments/${experimentId}`, {
        body: fields
      })
    ).experiment;
  }

  /** Delete a finished experiment with its trials, metrics, logs and checkpoints. */
  async deleteExperiment(experimentId: number): Promise<void> {
    await this.request<unknown>('DELETE', `experiments/${experimentId}`);
  }

  /** Start a TensorBoard on these experiments' trials (it serves a few seconds later). */
  async startTensorBoard(experimentIds: number[], trialIds: number[] = []): Promise<ITensorBoard> {
    const body = { experiment_ids: experimentIds, trial_ids: trialIds };
    return (await this.request<{ tensorboard: ITensorBoard }>('POST', 'tensorboards', { body }))
      .tensorboard;
  }

  async listTensorBoards(): Promise<ITensorBoard[]> {
    return (await this.request<{ tensorboards: ITensorBoard[] }>('GET', 'tensorboards'))
      .tensorboards;
  }

  async getTensorBoard(id: string): Promise<ITensorBoard> {
    return (await this.request<{ tensorboard: ITensorBoard }>('GET', `tensorboards/${id}`))
      .tensorboard;
  }

  /** The models of the registry, by name. */
  async listModels(): Promise<IModel[]> {
    return (
      await this.request<{ models: IModel[] }>('GET', 'models', { query: { sort_by: 'name' } })
    ).models;
  }

  /** A model's versions, newest first, each with its checkpoint. */
  async listModelVersions(modelId: number): Promise<IModelVersion[]> {
    return (
      await this.request<{ model_versions: IModelVersion[] }>('GET', `models/${modelId}/versions`, {
        query: { order_by: 'desc' }
      })
    ).model_versions;
  }

  /** How to attach to a kernel trial's kernel; a 409 says why there is none. */
  async trialKernel(trialId: number): Promise<ITrialKernel> {
    return this.request('GET', `trials/${trialId}/kernel`);
  }

  async resources(): Promise<IResources> {
    return this.request('GET', 'resources');
  }
}

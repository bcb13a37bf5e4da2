/**
 * The export preview's data: what the server's exporter answers (jupyter_determined/_preview.py,
 * `POST <base_url>determined/export-preview`), the `det-skip` tag rules, and the wording. No
 * JupyterLab widgets here, so the unit tests run in node.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { EXPORT_PREVIEW_PATH, SKIP_TAG } from '../api/contract.generated';

export { EXPORT_PREVIEW_PATH, SKIP_TAG };
/** Source of a cell that uses Determined (its notebook gets the sync and the skip toggles). */
export const USES_DETERMINED = /det_submit|jupyter_determined|determined/;

export type CellStatus = 'exported' | 'training' | 'left_out' | 'error';

/** One cell as the frontend sends it (the comm protocol of jupyter_determined/_export.py). */
export interface ICellInput {
  id: string;
  cell_type: string;
  source: string;
  metadata: { tags: string[] };
}

export interface ICellPreview {
  index: number;
  id: string | null;
  cell_type: string;
  status: CellStatus;
  /** Why it is left out: markdown, raw, det-skip, empty, det_submit, below, submitting, syntax_error. */
  reason: string | null;
  note: string | null;
  summary: string;
  /** IPython lines dropped or replaced (what the submission prints as warnings). */
  warnings: string[];
  code: string | null;
  script_lines: [number, number] | null;
}

export interface IExportPreview {
  mode: 'notebook' | 'cell';
  notebook_path: string | null;
  submit_cell_id: string | null;
  cells: ICellPreview[];
  /** null when a cell has a syntax error: the submission would fail. */
  script: string | null;
  warnings: string[];
  errors: string[];
  counts: Record<CellStatus, number>;
}

export interface IPreviewRequest {
  path: string;
  cells: ICellInput[];
  /** The submitting cell (`%%det_submit` or `%det_submit`); absent: the whole notebook. */
  submit_cell_id?: string | null;
}

/** Tags from cell metadata, whatever they hold. */
export function tagList(tags: unknown): string[] {
  return Array.isArray(tags) ? tags.map(String) : [];
}

export function hasSkipTag(tags: unknown): boolean {
  return tagList(tags).includes(SKIP_TAG);
}

/** The tags with `det-skip` added (`skip`) or removed, other tags kept in order. */
export function withSkipTag(tags: unknown, skip: boolean): string[] {
  const others = tagList(tags).filter(tag => tag !== SKIP_TAG);
  return skip ? [...others, SKIP_TAG] : others;
}

/**
 * How a cell submits: 'cell' for a `%%det_submit` cell, 'line' for a cell running `%det_submit`,
 * null otherwise (the same rule as the exporter: a cell magic on the first non-blank line).
 */
export function submitKind(source: string): 'cell' | 'line' | null {
  const first = source.split('\n').find(line => line.trim() !== '');
  if (first !== undefined && /^\s*%%det_submit\b/.test(first)) {
    return 'cell';
  }
  return /^[ \t]*%det_submit\b/m.test(source) ? 'line' : null;
}

/**
 * Which submission to preview: the active cell when it submits, else the notebook's only
 * submitting cell, else none (the whole notebook, as the toolbar's "Submit to Determined").
 */
export function previewTarget(
  cells: ReadonlyArray<Pick<ICellInput, 'id' | 'cell_type' | 'source'>>,
  activeIndex: number
): string | null {
  const submitting = cells.filter(
    cell => cell.cell_type === 'code' && submitKind(cell.source) !== null
  );
  const active = cells[activeIndex];
  if (active && submitting.includes(active)) {
    return active.id;
  }
  return submitting.length === 1 ? submitting[0].id : null;
}

function plural(count: number, one: string, many: string = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

/** One line: what goes in, what is left out, how many IPython lines are dropped. */
export function previewSummary(preview: IExportPreview): string {
  const counts = preview.counts;
  const parts = [
    `${plural(counts.exported + counts.training, 'cell')} go${counts.exported + counts.training === 1 ? 'es' : ''} in`
  ];
  parts.push(`${counts.left_out} left out`);
  const dropped = preview.cells.reduce((sum, cell) => sum + cell.warnings.length, 0);
  if (dropped) {
    parts.push(`${plural(dropped, 'IPython line')} dropped or replaced`);
  }
  if (counts.error) {
    parts.push(`${plural(counts.error, 'cell')} with errors: the submission would fail`);
  }
  return parts.join(' · ');
}

/** The chip of a cell's row. */
export function statusLabel(cell: ICellPreview): string {
  switch (cell.status) {
    case 'exported':
      return 'goes in';
    case 'training':
      return 'training code';
    case 'error':
      return 'error';
    default:
      return 'left out';
  }
}

/** "cell 3", as the exporter's warnings and the trial's tracebacks number cells. */
export function cellLabel(cell: Pick<ICellPreview, 'index'>): string {
  return `cell ${cell.index + 1}`;
}

/** The heading of a preview. */
export function previewHeading(preview: IExportPreview): string {
  if (preview.mode === 'cell') {
    const submitting = preview.cells.find(cell => cell.id === preview.submit_cell_id);
    const where = submitting ? cellLabel(submitting) : 'the submitting cell';
    return submitting?.status === 'left_out'
      ? `What %det_submit in ${where} exports: the cells above it`
      : `What %%det_submit in ${where} exports: the cells above it and its body`;
  }
  return 'What “Submit to Determined” exports: the whole notebook';
}

/** Ask the server's exporter. Errors carry the server's one-line message. */
export async function fetchExportPreview(
  request: IPreviewRequest,
  settings: ServerConnection.ISettings
): Promise<IExportPreview> {
  const url = URLExt.join(settings.baseUrl, EXPORT_PREVIEW_PATH);
  const response = await ServerConnection.makeRequest(
    url,
    {
      method: 'POST',
      body: JSON.stringify(request),
      headers: { 'Content-Type': 'application/json' }
    },
    settings
  );
  const text = await response.text();
  let body: { message?: unknown; cells?: unknown } | null = null;
  try {
    const parsed: unknown = text ? JSON.parse(text) : null;
    body = parsed && typeof parsed === 'object' ? parsed : null;
  } catch {
    // not JSON: described below
  }
  if (!response.ok) {
    const message =
      typeof body?.message === 'string' ? body.message : text.replace(/\s+/g, ' ').slice(0, 200);
    if (response.status === 404 && !body?.message) {
      throw new Error(
        'the export preview is not served here (404): is the jupyter_determined server extension enabled? (jupyter server extension list)'
      );
    }
    throw new Error(`export preview: HTTP ${response.status}${message ? ` — ${message}` : ''}`);
  }
  if (!body || !Array.isArray(body.cells)) {
    throw new Error('export preview: the server answered something else than a preview');
  }
  return body as unknown as IExportPreview;
}

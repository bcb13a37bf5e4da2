/**
 * The live event feed of the master (`<base_url>determined/api/v1/events`, server-sent events):
 * one stream shared by every panel, with a fallback to polling.
 */
import { PageConfig } from '@jupyterlab/coreutils';

import type { DeterminedClient, Query } from './client';
import type { EventType } from './types';
import { parseApiJson } from './nonFinite';

export type EventListener = (type: EventType, payload: unknown) => void;

/** How the hub is getting updates: the SSE stream, or polling after the stream failed. */
export type FeedMode = 'connecting' | 'live' | 'polling';

export interface IFeedSubscriber {
  /** The event types this subscriber needs. */
  types: EventType[];
  onEvent: EventListener;
  /** Called on every polling tick while the stream is down: refresh over REST. */
  onPoll: () => void;
}

/**
 * One shared EventSource for the whole extension.
 *
 * Browsers allow ~6 connections per host over HTTP/1.1 and an EventSource holds one for good:
 * a stream per panel would starve the page's other requests. So every panel subscribes here,
 * the hub opens one stream with the union of the types they need, and dispatches locally.
 * When the stream cannot be opened (a proxy that buffers, a server that refuses it) the hub
 * falls back to asking subscribers to poll, and tries the stream again now and then.
 */
export class EventHub {
  readonly modeChanged = new Set<(mode: FeedMode) => void>();
  private _subscribers = new Set<IFeedSubscriber>();
  private _source: EventSource | null = null;
  private _sourceTypes = '';
  private _mode: FeedMode = 'connecting';
  private _pollTimer: number | null = null;
  private _retryTimer: number | null = null;
  private _failures = 0;

  constructor(
    private readonly _client: DeterminedClient,
    readonly pollIntervalMs = 3000,
    readonly retryStreamMs = 60000
  ) {}

  get mode(): FeedMode {
    return this._mode;
  }

  subscribe(subscriber: IFeedSubscriber): () => void {
    this._subscribers.add(subscriber);
    this._reconcile();
    return () => {
      this._subscribers.delete(subscriber);
      this._reconcile();
    };
  }

  dispose(): void {
    this._subscribers.clear();
    this._reconcile();
  }

  private _wantedTypes(): string {
    const types = new Set<EventType>();
    for (const subscriber of this._subscribers) {
      subscriber.types.forEach(t => types.add(t));
    }
    return [...types].sort().join(',');
  }

  private _setMode(mode: FeedMode): void {
    if (mode !== this._mode) {
      this._mode = mode;
      this.modeChanged.forEach(listener => listener(mode));
    }
  }

  /** Open, reopen or close the stream so it carries exactly the types subscribers need. */
  private _reconcile(): void {
    const wanted = this._wantedTypes();
    if (!wanted) {
      this._closeSource();
      this._stopPolling();
      return;
    }
    if (this._mode === 'polling') {
      return; // the retry timer reopens the stream with whatever is wanted then
    }
    if (this._source && wanted === this._sourceTypes) {
      return;
    }
    this._openSource(wanted);
  }

  private _openSource(types: string): void {
    this._closeSource();
    if (typeof EventSource === 'undefined') {
      this._startPolling();
      return;
    }
    const query: Query = { types };
    const token = this._client.settings.token;
    if (behindJupyterHub()) {
      // The cookie signs the stream in; a cookie-signed request that is not a page load needs
      // the XSRF token, which an EventSource can only send in the query.
      const xsrf = xsrfCookie();
      if (xsrf) {
        query._xsrf = xsrf;
      }
    } else if (token) {
      query.token = token; // EventSource cannot set headers; the API accepts ?token=
    }
    const source = new EventSource(this._client.url('events', query), { withCredentials: true });
    this._source = source;
    this._sourceTypes = types;
    source.onopen = () => {
      this._failures = 0;
      this._setMode('live');
      // Events published before the stream (re)opened were not seen: let everyone catch up.
      for (const subscriber of [...this._subscribers]) {
        subscriber.onPoll();
      }
    };
    source.onerror = () => {
      // EventSource retries by itself after a dropped connection; a refused one (non-200)
      // ends CLOSED. Either way, after a few failures in a row polling is more useful.
      this._failures += 1;
      if (source.readyState === EventSource.CLOSED || this._failures >= 3) {
        this._startPolling();
      } else {
        this._setMode('connecting');
      }
    };
    for (const type of types.split(',') as EventType[]) {
      source.addEventListener(type, (event: MessageEvent) => this._dispatch(type, event.data));
    }
  }

  private _dispatch(type: EventType, data: string): void {
    let payload: unknown;
    try {
      payload = parseApiJson(data);
    } catch {
      console.warn(`jupyter-determined: ignoring a ${type} event that is not JSON`, data);
      return;
    }
    for (const subscriber of [...this._subscribers]) {
      if (subscriber.types.includes(type)) {
        try {
          subscriber.onEvent(type, payload);
        } catch (error) {
          console.error('jupyter-determined: an event handler failed', error);
        }
      }
    }
  }

  private _closeSource(): void {
    if (this._source) {
      this._source.close();
      this._source = null;
      this._sourceTypes = '';
    }
  }

  private _startPolling(): void {
    this._closeSource();
    this._setMode('polling');
    if (this._pollTimer === null) {
      this._pollTimer = window.setInterval(() => {
        for (const subscriber of [...this._subscribers]) {
          subscriber.onPoll();
        }
      }, this.pollIntervalMs);
    }
    if (this._retryTimer === null) {
      this._retryTimer = window.setTimeout(() => {
        this._retryTimer = null;
        this._stopPolling();
        this._failures = 0;
        this._setMode('connecting');
        this._reconcile();
      }, this.retryStreamMs);
    }
  }

  private _stopPolling(): void {
    if (this._pollTimer !== null) {
      window.clearInterval(this._pollTimer);
      this._pollTimer = null;
    }
    if (this._retryTimer !== null) {
      window.clearTimeout(this._retryTimer);
      this._retryTimer = null;
    }
  }
}

/**
 * True in a JupyterHub single-user server. Its auth ignores a token in a page's URL (JupyterHub
 * 5: `allow_token_in_url` off) and the stream then fails with 401; the browser's OAuth cookie for
 * the server, which an EventSource sends, signs the stream in there instead (with `_xsrf`).
 */
export function behindJupyterHub(): boolean {
  return Boolean(PageConfig.getOption('hubPrefix'));
}

/** The `_xsrf` cookie Jupyter's server set for this page ('' when there is none). */
function xsrfCookie(): string {
  if (typeof document === 'undefined') {
    return '';
  }
  const found = document.cookie.match('\\b_xsrf=([^;]*)\\b');
  return found ? decodeURIComponent(found[1]) : '';
}

/**
 * Unit tests of the event stream's URL: Jupyter's token goes in the query (an EventSource
 * cannot send headers), except behind JupyterHub, whose single-user servers refuse tokens in
 * URLs: there the browser's cookie signs the stream in.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';

import { PageConfig } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { DeterminedClient } from '../src/api/client';
import { EventHub } from '../src/api/events';

/** Where the browser's globals live (EventSource, document) in these tests. */
const scope = globalThis as unknown as Record<string, unknown>;

/** The URLs EventSources were opened with. */
const opened: string[] = [];

class RecordingEventSource {
  onopen: (() => void) | null = null;
  onerror: (() => void) | null = null;
  constructor(url: string) {
    opened.push(url);
  }
  addEventListener(): void {}
  close(): void {}
}

/** The URL the stream opens with (`cookie`: the page's cookies, if it has a document). */
function streamUrl(cookie?: string): URL {
  scope.EventSource = RecordingEventSource;
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://lab.test/user/ann/',
    token: 'jtok'
  });
  if (cookie !== undefined) {
    scope.document = { cookie };
  }
  const hub = new EventHub(new DeterminedClient(settings));
  hub.subscribe({ types: ['experiment'], onEvent: () => undefined, onPoll: () => undefined });
  hub.dispose();
  return new URL(opened[opened.length - 1]);
}

describe('the event stream URL', () => {
  afterEach(() => {
    PageConfig.setOption('hubPrefix', '');
    delete scope.EventSource;
  });

  test("carries Jupyter's token where the server accepts it in URLs", () => {
    assert.equal(streamUrl().searchParams.get('token'), 'jtok');
  });

  test('leaves it out behind JupyterHub, sending the XSRF cookie instead', () => {
    PageConfig.setOption('hubPrefix', '/hub/');
    try {
      const url = streamUrl('other=1; _xsrf=2%7Cabc; more=2');
      assert.equal(url.searchParams.get('token'), null);
      assert.equal(url.searchParams.get('_xsrf'), '2|abc');
      assert.equal(url.searchParams.get('types'), 'experiment');
    } finally {
      delete scope.document;
    }
  });
});

/**
 * Unit tests of the sidebar's scheduling helpers: one render per animation frame, one load at a
 * time.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { oncePerFrame, singleFlight } from '../src/model/schedule';

describe('oncePerFrame', () => {
  test('a burst of calls runs once, on the next frame; a later call runs again', () => {
    const frames: (() => void)[] = [];
    const saved = globalThis.requestAnimationFrame;
    globalThis.requestAnimationFrame = (callback: FrameRequestCallback): number =>
      frames.push(() => callback(0));
    try {
      let renders = 0;
      const queue = oncePerFrame(() => renders++);
      queue();
      queue();
      queue();
      assert.equal(renders, 0);
      assert.equal(frames.length, 1);
      frames.shift()?.();
      assert.equal(renders, 1);
      queue();
      assert.equal(frames.length, 1);
      frames.shift()?.();
      assert.equal(renders, 2);
    } finally {
      globalThis.requestAnimationFrame = saved;
    }
  });
});

describe('singleFlight', () => {
  test('calls while a load runs share it; after it settles, even by failing, a call loads again', async () => {
    const finish: ((error?: Error) => void)[] = [];
    const load = singleFlight(
      () =>
        new Promise<void>((resolve, reject) =>
          finish.push(error => (error ? reject(error) : resolve()))
        )
    );
    const first = load();
    assert.equal(load(), first);
    assert.equal(finish.length, 1);
    finish[0]();
    await first;
    const second = load();
    assert.notEqual(second, first);
    assert.equal(finish.length, 2);
    finish[1](new Error('master gone'));
    await assert.rejects(second, /master gone/);
    load();
    assert.equal(finish.length, 3);
    finish[2]();
  });
});

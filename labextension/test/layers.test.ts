/**
 * The folders of src/ are layers: a module imports only from its own folder and the layers
 * below it, so the folder names say who may call whom.
 *
 *   api (REST client, events, types generated from the master's OpenAPI document)
 *   model (state and pure decisions)  ←  chart (uPlot, parcoords)  ←  views (sidebar, tabs)
 *   ←  export (export preview, det-skip, notebook sync)  ←  notebook (the widget, submit)
 *   ←  index.ts (the plugin)
 *
 * dom.ts (the tiny DOM builder) sits at the root for chart and everything above it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

// Compiled to lib/.test/test/, run from the package root.
const src = path.resolve(__dirname, '..', '..', '..', 'src');
const LAYERS = ['api', 'model', 'chart', 'views', 'export', 'notebook', 'index'];
const DOM_FROM = LAYERS.indexOf('chart');

function layerOf(file: string): number {
  const relative = path.relative(src, file);
  const first = relative.split(path.sep)[0];
  if (first === 'dom.ts') {
    return DOM_FROM - 0.5; // above model, below chart
  }
  return LAYERS.indexOf(first.replace(/\.ts$/, ''));
}

function sources(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap(entry =>
      entry.isDirectory()
        ? sources(path.join(dir, entry.name))
        : entry.name.endsWith('.ts')
          ? [path.join(dir, entry.name)]
          : []
    );
}

test('every module of src/ is in a layer', () => {
  const outside = sources(src).filter(file => layerOf(file) < 0);
  assert.deepEqual(outside, []);
});

test('a module imports only its own layer and the layers below it', () => {
  const upward: string[] = [];
  for (const file of sources(src)) {
    const text = fs.readFileSync(file, 'utf8');
    for (const match of text.matchAll(/from '(\.{1,2}\/[^']+)'/g)) {
      const target = path.resolve(path.dirname(file), match[1]) + '.ts';
      if (layerOf(target) > layerOf(file)) {
        upward.push(`${path.relative(src, file)} imports ${match[1]}`);
      }
    }
  }
  assert.deepEqual(upward, []);
});

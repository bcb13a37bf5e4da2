/**
 * The empty stand-in for @jupyterlab/markedparser-extension (stubs/markedparser-extension) is safe
 * only while no type declaration the sidebar can reach imports the real package: `skipLibCheck`
 * would hide such an import and quietly turn its types into `any`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

// Compiled to lib/.test/test/, run from the package root.
const root = path.resolve(__dirname, '..', '..', '..');

function declarationFiles(dir: string): string[] {
  const found: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      found.push(...declarationFiles(full));
    } else if (entry.name.endsWith('.d.ts')) {
      found.push(full);
    }
  }
  return found;
}

test('no JupyterLab type declaration imports the stubbed markedparser-extension', () => {
  const scope = path.join(root, 'node_modules', '@jupyterlab');
  const importers = fs
    .readdirSync(scope)
    .filter(name => name !== 'markedparser-extension')
    .map(name => path.join(scope, name, 'lib'))
    .filter(dir => fs.existsSync(dir))
    .flatMap(declarationFiles)
    .filter(file => fs.readFileSync(file, 'utf8').includes('@jupyterlab/markedparser-extension'))
    .map(file => path.relative(root, file));
  assert.deepEqual(importers, []);
});

test('the stand-in is what is installed', () => {
  const installed = path.join(root, 'node_modules', '@jupyterlab', 'markedparser-extension');
  assert.equal(
    fs.realpathSync(installed),
    fs.realpathSync(path.join(root, 'stubs', 'markedparser-extension'))
  );
});

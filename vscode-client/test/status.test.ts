import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { edgeTotal, statusView } from '../src/status';

test('statusView: files and edges', () => {
  const v = statusView({ files: 12, nodes: 80, edges: { CALLS: 40, IMPORTS: 9 }, dirty_files: [], stale: false, indexing: false });
  assert.equal(v.text, '$(database) ctx: 12 files · 49 edges');
  assert.equal(v.warning, false);
  assert.match(v.tooltip, /CALLS 40 · IMPORTS 9/);
});

test('statusView: stale and indexing', () => {
  const stale = statusView({ files: 1, edges: { CALLS: 1 }, dirty_files: ['a.py'], stale: true, indexing: false });
  assert.equal(stale.text, '$(database) ctx: 1 file · 1 edge · $(warning) stale (1)');
  assert.equal(stale.warning, true);
  assert.match(stale.tooltip, /Stale: a\.py/);
  assert.match(statusView({ files: 3, indexing: true }).text, /ctx: indexing… 3 files/);
  assert.match(statusView(undefined, { percentage: 42.4 }).text, /ctx: indexing 42%…/);
  const busy = statusView({ files: 0, indexing: false }, { percentage: 10, message: 'ws: parsing 1/10' });
  assert.equal(busy.text, '$(sync~spin) ctx: indexing 10%…');
  assert.match(busy.tooltip, /^Indexing: ws: parsing 1\/10/);
  // a progress that is not indexing says what it is (the server waits for git to finish a checkout)
  const git = statusView({ files: 4, edges: { CALLS: 2 }, indexing: false },
    { title: 'ctx-lsp: waiting for git', message: 'ws: changes on disk go in once git is done writing the tree' });
  assert.equal(git.text, '$(sync~spin) ctx: waiting for git… 4 files');
  assert.match(git.tooltip, /^Waiting for git: ws: changes on disk go in/);
  assert.match(statusView({ files: 4, indexing: false }, { title: 'ctx-lsp: indexing', message: 'ws' }).text, /ctx: indexing… 4 files/);
  assert.equal(edgeTotal({ edges: 7 }), 7);
  const failed = statusView({ files: 2, edges: {}, stale: true, indexing: false, folders: [{ name: 'ws', state: 'failed', error: 'disk full' }] });
  assert.equal(failed.text, '$(database) ctx: 2 files · 0 edges · $(warning) stale · $(error) indexing failed');
  assert.match(failed.tooltip, /Folder ws: indexing failed: disk full/);
});

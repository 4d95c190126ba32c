import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { DEFAULTS, expandPath, initializationOptions, serverSettings, shellQuote } from '../src/config';

test('initializationOptions: defaults and values', () => {
  assert.deepEqual(initializationOptions(() => undefined), DEFAULTS);
  const s: Record<string, unknown> = { budget: 1500, include: ['src/**'], exclude: ['**/gen/**', 3], cacheDir: '~/c', jediRefinement: false, codeLens: false };
  assert.deepEqual(initializationOptions((k) => s[k], (p) => p.replace('~', '/home/u')), {
    budget: 1500, include: ['src/**'], exclude: ['**/gen/**'], cacheDir: '/home/u/c', jediRefinement: false, codeLens: false,
  });
  assert.equal(initializationOptions((k) => (k === 'budget' ? -3 : undefined)).budget, 4000);
});

test('initializationOptions has exactly the keys the server reads', () => {
  assert.deepEqual(Object.keys(initializationOptions(() => undefined)).sort(), ['budget', 'cacheDir', 'codeLens', 'exclude', 'include', 'jediRefinement']);
});

test('expandPath', () => {
  const vars = { home: '/home/u', workspaceFolder: '/ws', env: { VENV: '/opt/v' } };
  assert.equal(expandPath('~/.venv/bin/python', vars), '/home/u/.venv/bin/python');
  assert.equal(expandPath('${workspaceFolder}/.venv/bin/python', vars), '/ws/.venv/bin/python');
  assert.equal(expandPath('${env:VENV}/bin/python', vars), '/opt/v/bin/python');
  assert.equal(expandPath(' python3 ', vars), 'python3');
});

test('shellQuote', () => {
  assert.equal(shellQuote('/usr/bin/python3'), '/usr/bin/python3');
  assert.equal(shellQuote('/a b/python'), `'/a b/python'`);
  assert.equal(shellQuote(`it's`), `'it'\\''s'`);
});

test('serverSettings: set values go to the server as written, for it to check and warn about', () => {
  assert.deepEqual(serverSettings(() => undefined), DEFAULTS);
  const s: Record<string, unknown> = { budget: -5, exclude: 'tests/**', cacheDir: '~/c', codeLens: 'yes' };
  assert.deepEqual(serverSettings((k) => s[k], (p) => p.replace('~', '/home/u')), {
    budget: -5, include: [], exclude: 'tests/**', cacheDir: '/home/u/c', jediRefinement: true, codeLens: 'yes',
  });
  // the extension's own defaults (a command's budget) stay valid
  assert.equal(initializationOptions((k) => s[k]).budget, 4000);
});

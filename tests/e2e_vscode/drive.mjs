#!/usr/bin/env node
// Drives a running code-server (real VS Code workbench) with headless Chromium through the
// ctx-lsp extension's user journeys. Based on /work/shared/vscode-e2e/drive-example.mjs.
//
// Usage: node drive.mjs --url URL --artifacts DIR [--query "who calls save"]
//          [--expect-file shop/service.py] [--neighbours-file shop/service.py] [--timeout 120000]
// Env: VSCODE_E2E_PLAYWRIGHT, VSCODE_E2E_CHROMIUM (from the vscode-e2e setup script).
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string' },
    artifacts: { type: 'string', default: 'test-artifacts' },
    query: { type: 'string', default: 'who calls save' },
    'expect-file': { type: 'string', default: 'shop/service.py' },
    'neighbours-file': { type: 'string', default: 'shop/service.py' },
    timeout: { type: 'string', default: '120000' },
    // Optional: the Machine settings.json to rewrite, and an interpreter without ctx_lsp, to check
    // the "not installed" notification and the restart on a settings change.
    'settings-file': { type: 'string' },
    'bad-python': { type: 'string' },
    // Optional: the opened folder, a git work tree, for the wait while git holds its index lock.
    workspace: { type: 'string' },
  },
});
if (!opt.url) {
  console.error('usage: drive.mjs --url URL [--artifacts DIR] [--query Q] [--expect-file PATH]');
  process.exit(2);
}
const timeout = Number(opt.timeout);
mkdirSync(opt.artifacts, { recursive: true });
const require = createRequire(import.meta.url);
const { chromium } = require(process.env.VSCODE_E2E_PLAYWRIGHT || 'playwright-core');
const t0 = Date.now();
const log = (msg) => console.log(`[drive +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
const shot = async (name, settle = true) => {
  const p = join(opt.artifacts, name);
  if (settle) {
    // No hover widgets or progress toasts in the picture.
    await page.mouse.move(1100, 18).catch(() => {});
    await page.locator('.notifications-toasts .notification-toast').first().waitFor({ state: 'detached', timeout: 5000 }).catch(() => {});
    await page.waitForTimeout(300);
  }
  await page.screenshot({ path: p, animations: 'disabled' }).then(() => log(`screenshot ${p}`), (e) => log(`screenshot failed: ${e.message}`));
};

const browser = await chromium.launch({
  executablePath: process.env.VSCODE_E2E_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: [
    '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost',
  ],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
await context.grantPermissions(['clipboard-read', 'clipboard-write']).catch(() => {});
const page = await context.newPage();
page.on('pageerror', (e) => log(`page error: ${e.message}`));
const cspMessages = [];
page.on('console', (m) => {
  if (/Content.Security.Policy/i.test(m.text())) cspMessages.push(m.text());
});
const ISSUE = [
  'Orders placed through the service are sometimes missing from the repository',
  '',
  'When I call OrderService.place_order twice with the same order id, the second order replaces the',
  'first one in Repository.save and the first order is lost. I expected an error.',
  '',
  'Steps: create an OrderService, place order "o-1" with two items, then place "o-1" again; find("o-1")',
  'returns the second order. The storage in shop/models.py should refuse duplicate ids.',
].join('\n');

async function statusTexts() {
  return page.locator('.monaco-workbench .part.statusbar .statusbar-item').allInnerTexts().catch(() => []);
}
async function notificationTexts() {
  return page.locator('.notifications-toasts .notification-list-item-message').allInnerTexts().catch(() => []);
}

/** Runs a command by its Command Palette title (retrying until the extension registered it). */
async function runCommand(title) {
  const input = page.locator('.quick-input-widget input').first();
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  for (const deadline = Date.now() + timeout; ;) {
    await page.keyboard.press('Escape');
    await page.keyboard.press('F1');
    try {
      await input.waitFor({ state: 'visible', timeout: 3000 });
      await input.fill('>' + title);
      await row.waitFor({ timeout: 2000 });
      break;
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`command "${title}" not in palette: ${e.message}`);
      await page.waitForTimeout(1000);
    }
  }
  await page.keyboard.press('Enter');
  log(`ran "${title}"`);
}

/** Finds the webview frame whose document has `selector` with `text`, polling all frames. */
async function findInWebview(selector, text, ms) {
  for (const deadline = Date.now() + ms; ;) {
    for (const frame of page.frames()) {
      try {
        const loc = frame.locator(selector, { hasText: text });
        if (await loc.count()) return { frame, loc: loc.first() };
      } catch {
        /* frame detached or navigating */
      }
    }
    if (Date.now() > deadline) return undefined;
    await page.waitForTimeout(500);
  }
}

let code = 0;
let step = 'load';
try {
  await page.goto(opt.url, { waitUntil: 'domcontentloaded', timeout });
  await page.locator('.monaco-workbench').waitFor({ timeout });
  await page.locator('.monaco-workbench .part.statusbar').waitFor({ timeout });
  log('workbench ready');

  // 1. The server indexes the workspace: the status bar turns into "ctx: N files · M edges".
  step = 'status bar';
  const ready = page.locator('.monaco-workbench .part.statusbar .statusbar-item', { hasText: /ctx: \d+ files? · \d+ edges?/ }).first();
  const failed = page.locator('.monaco-workbench .part.statusbar .statusbar-item', { hasText: 'ctx: not running' }).first();
  const which = await Promise.race([
    ready.waitFor({ timeout }).then(() => 'ready', () => 'timeout'),
    // (the loser of the race must not reject later, unhandled)
    failed.waitFor({ timeout }).then(() => 'failed', () => new Promise(() => {})),
  ]);
  if (which !== 'ready') {
    throw new Error(`the server did not start; notifications: ${JSON.stringify(await notificationTexts())}`);
  }
  const statusText = (await ready.innerText()).trim();
  log(`status bar: "${statusText}"`);
  const m = /ctx: (\d+) files?/.exec(statusText);
  if (!m || Number(m[1]) < 3) throw new Error(`expected at least 3 indexed files, status bar says "${statusText}"`);

  // 2. CTX: Get Context… -> input box -> the context view lists the expected file.
  step = 'get context';
  await runCommand('CTX: Get Context…');
  const box = page.locator('.quick-input-widget input').first();
  await box.waitFor({ state: 'visible', timeout: 10000 });
  await page.locator('.quick-input-widget', { hasText: 'CTX: Get Context' }).first().waitFor({ timeout: 10000 });
  await box.fill(opt.query);
  await page.keyboard.press('Enter');
  log(`query "${opt.query}"`);
  const hit = await findInWebview('.span-link', opt['expect-file'], 60000);
  if (!hit) {
    const links = [];
    for (const f of page.frames()) links.push(...(await f.locator('.span-link').allInnerTexts().catch(() => [])));
    throw new Error(`context view does not name ${opt['expect-file']}; links: ${JSON.stringify(links)}; notifications: ${JSON.stringify(await notificationTexts())}`);
  }
  const links = await hit.frame.locator('.span-link').allInnerTexts();
  const budget = await hit.frame.locator('#budget').innerText();
  log(`context view: ${budget}; items: ${links.join(', ')}`);
  for (const label of ['Copy as Markdown', 'Open All']) {
    if (!(await hit.frame.locator('button', { hasText: label }).count())) throw new Error(`context view lacks the "${label}" action`);
  }
  await page.waitForTimeout(500);
  await shot('vscode-context.png');

  // "Copy as Markdown" puts the pack on the clipboard as Markdown.
  step = 'copy as markdown';
  await hit.frame.locator('button', { hasText: 'Copy as Markdown' }).click();
  await page.locator('.notifications-toasts', { hasText: 'copied as Markdown' }).first().waitFor({ timeout: 15000 });
  const md = await page.evaluate(() => navigator.clipboard.readText()).catch((e) => `(clipboard not readable: ${e.message})`);
  log(`clipboard: ${JSON.stringify(md.slice(0, 120))}…`);
  if (!md.startsWith(`# Context: ${opt.query}`) || !md.includes(opt['expect-file'])) throw new Error(`unexpected Markdown on the clipboard: ${md.slice(0, 300)}`);

  // "Open All" opens every item's file.
  step = 'open all';
  await hit.frame.locator('button', { hasText: 'Open All' }).click();
  for (const link of links) {
    const name = link.split(':')[0].split('/').pop();
    await page.locator('.tabs-container .tab', { hasText: name }).first().waitFor({ timeout: 15000 });
  }
  log(`Open All opened ${links.length} files`);

  // 3. The path:lines link opens the span in an editor.
  step = 'open link';
  await hit.loc.click();
  const base = opt['neighbours-file'].split('/').pop();
  const tab = page.locator('.tabs-container .tab.active', { hasText: opt['expect-file'].split('/').pop() }).first();
  await tab.waitFor({ timeout: 15000 });
  log(`link opened ${opt['expect-file']}`);
  if (opt['expect-file'] !== opt['neighbours-file']) {
    throw new Error('--neighbours-file must equal --expect-file (the link opens it)');
  }

  // 4. CTX: Show Architectural Neighbours on the open file -> tree with edge groups.
  step = 'neighbours';
  await page.locator('.tabs-container .tab', { hasText: base }).first().click();
  await runCommand('CTX: Show Architectural Neighbours');
  const pane = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'CTX Neighbours' }) }).first();
  await pane.waitFor({ timeout: 30000 });
  const groupRow = pane.locator('.monaco-list-row', { hasText: /^[A-Z_]+ [→←]/ }).first();
  await groupRow.waitFor({ timeout: 30000 });
  await page.waitForTimeout(500);
  const rows = await pane.locator('.monaco-list-row').allInnerTexts();
  log(`neighbours tree: ${JSON.stringify(rows.map((r) => r.replace(/\s+/g, ' ').trim()))}`);
  const groups = rows.filter((r) => /^[A-Z_]+ [→←]/.test(r.trim()));
  if (!groups.length) throw new Error('no edge groups in the neighbours tree');
  if (!rows.some((r) => /IMPORTS →/.test(r))) throw new Error(`expected an "IMPORTS →" group for ${opt['neighbours-file']}`);
  if (!rows.some((r) => r.includes('models.py') || r.includes('Repository'))) throw new Error('expected shop/models.py (or Repository) among the neighbours');
  // the fixture's commit: a TOUCHED group whose row names the commit by hash and subject (the last
  // group: the tree renders the rows in view, so go to its end first)
  await groupRow.click();
  await page.keyboard.press('End');
  await page.waitForTimeout(500);
  const tail = (await pane.locator('.monaco-list-row').allInnerTexts()).map((r) => r.replace(/\s+/g, ' ').trim());
  log(`neighbours tree, its end: ${JSON.stringify(tail)}`);
  if (!tail.some((r) => /TOUCHED ←/.test(r))) throw new Error('expected a "TOUCHED ←" group (the fixture is committed)');
  if (!tail.some((r) => /^[0-9a-f]{10} e2e fixture commit/.test(r))) throw new Error('expected the commit "e2e fixture commit" among the neighbours');
  await page.keyboard.press('Home');
  await shot('vscode-neighbours.png');

  // 5. Clicking a neighbour opens its location.
  step = 'open neighbour';
  const nb = pane.locator('.monaco-list-row', { hasText: /models\.py|Repository/ }).first();
  await nb.click();
  await page.locator('.tabs-container .tab.active', { hasText: 'models.py' }).first().waitFor({ timeout: 15000 });
  log('neighbour opened models.py');

  // 5b. Code lenses (served by ctx-lsp with the command ctx.contextAtCursor): clicking one shows
  //     its pack in the extension's context view (a new rendering: body[data-seq] increases).
  step = 'code lens';
  const seqNow = async () => {
    let max = 0;
    for (const f of page.frames()) {
      const v = await f.locator('body[data-seq]').getAttribute('data-seq', { timeout: 200 }).catch(() => null);
      if (v) max = Math.max(max, Number(v));
    }
    return max;
  };
  const waitSeq = async (after, ms) => {
    for (const deadline = Date.now() + ms; Date.now() < deadline; await page.waitForTimeout(300)) {
      if ((await seqNow()) > after) return true;
    }
    return false;
  };
  const lens = page.locator('.editor-group-container.active .monaco-editor .codelens-decoration a', { hasNotText: /^\s*$/ }).first();
  if (await lens.waitFor({ timeout: 10000 }).then(() => true, () => false)) {
    const lensTexts = await page.locator('.editor-group-container.active .monaco-editor .codelens-decoration').allInnerTexts();
    log(`code lenses: ${JSON.stringify(lensTexts)}`);
    // Click a lens that is fully inside the editor's viewport (one at the top edge may sit under
    // the tab bar).
    const box = await page.locator('.editor-group-container.active .monaco-editor .overflow-guard').first().boundingBox();
    const anchors = page.locator('.editor-group-container.active .monaco-editor .codelens-decoration a', { hasNotText: /^\s*$/ });
    let target;
    for (let i = 0; i < (await anchors.count()); i++) {
      const b = await anchors.nth(i).boundingBox();
      if (b && box && b.y >= box.y + 4 && b.y + b.height <= box.y + box.height - 4) {
        target = anchors.nth(i);
        break;
      }
    }
    if (!target) throw new Error('no code lens inside the editor viewport');
    log(`clicking the lens "${(await target.innerText()).trim()}"`);
    const before = await seqNow();
    await target.click();
    if (!(await waitSeq(before, 30000))) throw new Error('clicking a code lens did not show a context pack');
    log('code lens opened the context view');
  } else {
    log('no code lenses shown in models.py (skipped)');
  }

  // 6. CTX: Context at Cursor on Repository.save (cursor placed with Go to Line).
  step = 'context at cursor';
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input').first();
  await input.waitFor({ state: 'visible', timeout: 5000 });
  await input.fill(':21:10');
  await page.keyboard.press('Enter');
  await page.locator('.monaco-workbench .part.statusbar .statusbar-item', { hasText: 'Ln 21, Col 10' }).first().waitFor({ timeout: 10000 });
  const activeTab = (await page.locator('.editor-group-container.active .tab.active').first().innerText()).replace(/\s+/g, '');
  log(`cursor at models.py:21:10 (active tab "${activeTab}")`);
  if (!activeTab.includes('models.py')) throw new Error(`expected models.py to be the active editor, got "${activeTab}"`);
  const seqBefore = await seqNow();
  await runCommand('CTX: Context at Cursor');
  if (!(await waitSeq(seqBefore, 60000))) throw new Error(`no new context view after Context at Cursor; notifications: ${JSON.stringify(await notificationTexts())}`);
  const at = await findInWebview('h1', 'Context', 10000);
  if (!at) throw new Error(`no context view after Context at Cursor; notifications: ${JSON.stringify(await notificationTexts())}`);
  const atLinks = await at.frame.locator('.span-link').allInnerTexts();
  const atTitle = await at.frame.locator('h1').innerText();
  log(`context at cursor: "${atTitle}"; items: ${atLinks.join(', ')}`);
  if (!atLinks.length) throw new Error('Context at Cursor returned no items');
  const atSymbols = await at.frame.locator('.sym').allInnerTexts();
  if (!atSymbols.some((t) => t.includes('Repository.save'))) throw new Error(`Context at Cursor on save() lacks Repository.save: ${JSON.stringify(atSymbols)}`);
  await shot('vscode-context-at-cursor.png');

  // 7a. The test-only probe extension checks the language-model tools (vscode.lm.invokeTool), the
  //     @ctx handler and the MCP definition from inside VS Code (report: probe.json).
  step = 'probe';
  await runCommand('CTX Probe: Check Tools');
  const verdict = page.locator('.notifications-toasts .notification-list-item-message', { hasText: /CTX probe: (PASS|FAIL)/ }).first();
  await verdict.waitFor({ timeout: 180000 });
  const verdictText = (await verdict.innerText()).trim();
  log(`probe: ${verdictText}`);
  if (!verdictText.includes('PASS')) throw new Error(verdictText);

  // 7b. The multi-line input: "CTX: Get Context…" -> its multi-line button opens a task document;
  //     a pasted multi-paragraph issue, selected, goes through "CTX: Context for Selection" (the
  //     editor title button of that document).
  step = 'multi-line input';
  await runCommand('CTX: Get Context…');
  await page.locator('.quick-input-widget', { hasText: 'CTX: Get Context' }).first().waitFor({ timeout: 10000 });
  await page.locator('.quick-input-widget input').first().fill('');
  await page.locator('.quick-input-widget [aria-label^="Multi-line"]').first().click();
  const taskEditor = page.locator('.editor-group-container.active .view-line', { hasText: '<!-- CTX task:' }).first();
  await taskEditor.waitFor({ timeout: 15000 });
  log('the multi-line button opened a task document');
  step = 'context for selection';
  await page.locator('.editor-group-container.active .monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+End');
  const pasted = await page.evaluate((t) => navigator.clipboard.writeText(t).then(() => true, () => false), ISSUE);
  if (pasted) await page.keyboard.press('Control+V');
  else await page.keyboard.insertText(ISSUE);
  await page.locator('.editor-group-container.active .view-line', { hasText: 'Steps: create an OrderService' }).first().waitFor({ timeout: 10000 });
  await page.keyboard.press('Control+A');
  log(`${pasted ? 'pasted' : 'typed'} a ${ISSUE.split('\n').length}-line issue and selected the document`);
  const seqSel = await seqNow();
  await page.locator('.editor-group-container.active .editor-actions [aria-label*="Context for Selection"]').first().click();
  log('clicked the editor title button "CTX: Context for Selection"');
  if (!(await waitSeq(seqSel, 60000))) throw new Error(`no new context view after Context for Selection; notifications: ${JSON.stringify(await notificationTexts())}`);
  const sel = await findInWebview('h1', /^Context: Orders placed through the service/, 10000);
  if (!sel) throw new Error('the context view does not show the issue title');
  const selLinks = await sel.frame.locator('.span-link').allInnerTexts();
  const taskSummary = (await sel.frame.locator('#task summary').innerText()).trim();
  log(`context for selection: "${(await sel.frame.locator('h1').innerText()).trim()}"; ${taskSummary}; items: ${selLinks.join(', ')}`);
  if (!taskSummary.startsWith('task text · 7 lines')) throw new Error(`the pack was not read as task text: "${taskSummary}"`);
  if (!selLinks.some((l) => l.startsWith('shop/service.py:10')) || !selLinks.some((l) => l.startsWith('shop/models.py:21'))) {
    throw new Error(`expected OrderService.place_order and Repository.save among the items: ${JSON.stringify(selLinks)}`);
  }
  await shot('vscode-context-for-selection.png');

  // 7c. CTX: Show Graph on shop/service.py (cursor on line 1: no symbol, so the file's graph).
  step = 'graph';
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  await input.waitFor({ state: 'visible', timeout: 5000 });
  await input.fill('shop/service.py');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'service.py' }).first().waitFor({ timeout: 10000 });
  await page.keyboard.press('Enter');
  await page.locator('.tabs-container .tab.active', { hasText: 'service.py' }).first().waitFor({ timeout: 10000 });
  await page.keyboard.press('F1');
  await input.waitFor({ state: 'visible', timeout: 5000 });
  await input.fill(':1:1');
  await page.keyboard.press('Enter');
  const cspBefore = cspMessages.length;
  await runCommand('CTX: Show Graph');
  const gv = await findInWebview('body[data-rendered="true"] h1', 'Graph: shop/service.py', 60000);
  if (!gv) throw new Error(`no rendered graph view; CSP messages: ${JSON.stringify(cspMessages)}; notifications: ${JSON.stringify(await notificationTexts())}`);
  const nodeNames = (await gv.frame.locator('#node-list .node-link').allInnerTexts()).map((t) => t.trim());
  const drawn = Number(await gv.frame.locator('body').getAttribute('data-nodes'));
  const drawnEdges = Number(await gv.frame.locator('body').getAttribute('data-edges'));
  const canvases = await gv.frame.locator('#cy canvas').count();
  log(`graph view: ${drawn} nodes, ${drawnEdges} edges drawn on ${canvases} canvases; nodes: ${JSON.stringify(nodeNames)}`);
  for (const want of ['service.py', 'models.py', 'Repository', 'Repository.save', 'Order', 'test_place_order_saves_it']) {
    if (!nodeNames.includes(want)) throw new Error(`the graph lacks the node ${want}: ${JSON.stringify(nodeNames)}`);
  }
  if (drawn !== nodeNames.length || drawnEdges < nodeNames.length - 1 || !canvases) throw new Error(`cytoscape drew ${drawn} nodes / ${drawnEdges} edges on ${canvases} canvases for ${nodeNames.length} listed nodes`);
  await page.waitForTimeout(500);
  if (cspMessages.length > cspBefore) throw new Error(`the graph view violated its CSP: ${JSON.stringify(cspMessages.slice(cspBefore))}`);
  await page.waitForTimeout(500);
  await shot('vscode-graph.png');
  // clicking a node opens it
  await gv.frame.locator('#node-list .node-link', { hasText: /^Repository\.save$/ }).first().click();
  await page.locator('.tabs-container .tab.active', { hasText: 'models.py' }).first().waitFor({ timeout: 15000 });
  const at21 = await page.locator('.monaco-workbench .part.statusbar .statusbar-item', { hasText: /Ln 21, Col \d+/ }).first()
    .waitFor({ timeout: 10000 }).then(() => true, () => false);
  if (!at21) throw new Error(`clicking Repository.save should open models.py:21, status bar: ${JSON.stringify(await statusTexts())}`);
  log('graph node Repository.save opened models.py:21');

  // 8. Files changed while git holds its index lock (a checkout under way) wait, and VS Code's status
  //    bar says so ("ctx-lsp: waiting for git", a work-done progress); once the lock is gone they go in.
  if (opt.workspace) {
    step = 'git wait';
    const before = Number(/ctx: (\d+) files?/.exec((await ready.innerText()).trim())[1]);
    const lock = join(opt.workspace, '.git', 'index.lock');
    writeFileSync(lock, '');
    writeFileSync(join(opt.workspace, 'shop', 'added_by_checkout.py'), 'def added_by_checkout():\n    return 1\n');
    const waiting = page.locator('.monaco-workbench .part.statusbar .statusbar-item', { hasText: 'waiting for git' }).first();
    await waiting.waitFor({ timeout: 30000 });
    const held = (await waiting.innerText()).trim();
    log(`while git holds its lock: "${held}"`);
    if (!held.includes(`${before} file`)) throw new Error(`the held change went in while git held its lock: "${held}"`);
    await shot('vscode-waiting-for-git.png', false);
    unlinkSync(lock);
    await waiting.waitFor({ state: 'detached', timeout: 30000 });
    const after = page.locator('.monaco-workbench .part.statusbar .statusbar-item', { hasText: new RegExp(`ctx: ${before + 1} files? ·`) }).first();
    await after.waitFor({ timeout: 30000 });
    log(`once the lock was gone: "${(await after.innerText()).trim()}"`);
  }

  // 7. A settings change restarts the server; an interpreter without ctx_lsp gives a notification
  //    with an "Install ctx-lsp" action (not a silent failure); restoring the setting recovers.
  if (opt['settings-file'] && opt['bad-python']) {
    step = 'missing ctx_lsp';
    const original = readFileSync(opt['settings-file'], 'utf8');
    const settings = JSON.parse(original);
    writeFileSync(opt['settings-file'], JSON.stringify({ ...settings, 'ctxLsp.interpreter': opt['bad-python'] }, null, 2));
    log(`set ctxLsp.interpreter to ${opt['bad-python']}`);
    const toast = page.locator('.notifications-toasts .notification-toast', { hasText: 'not installed' }).first();
    await toast.waitFor({ timeout: 60000 });
    const msg = (await toast.locator('.notification-list-item-message').innerText()).trim();
    log(`notification: "${msg}"`);
    if (!(await toast.locator('.monaco-button', { hasText: 'Install ctx-lsp' }).count())) throw new Error('the notification has no "Install ctx-lsp" action');
    await page.locator('.monaco-workbench .part.statusbar .statusbar-item', { hasText: 'ctx: not running' }).first().waitFor({ timeout: 10000 });
    await shot('vscode-missing-ctx-lsp.png', false);
    // The action runs `<python> -m pip install ctx-lsp` in a terminal (here it fails at once:
    // this interpreter has no pip, so nothing is downloaded) and offers a restart.
    await toast.locator('.monaco-button', { hasText: 'Install ctx-lsp' }).click();
    await page.locator('.notifications-toasts', { hasText: 'when the installation in the terminal has finished' }).first().waitFor({ timeout: 15000 });
    await page.locator('.part.panel', { hasText: 'Install ctx-lsp' }).first().waitFor({ timeout: 15000 });
    log('"Install ctx-lsp" opened the "Install ctx-lsp" terminal');
    await page.waitForTimeout(1500);
    await shot('vscode-install-terminal.png', false);
    step = 'restore interpreter';
    writeFileSync(opt['settings-file'], original);
    await ready.waitFor({ timeout });
    log(`restarted after restoring the setting: "${(await ready.innerText()).trim()}"`);
  }
  log('PASS');
} catch (e) {
  code = 1;
  console.error(`[drive] FAILED at step "${step}": ${e.message}`);
  console.error(`[drive] status bar: ${JSON.stringify(await statusTexts())}`);
  console.error(`[drive] notifications: ${JSON.stringify(await notificationTexts())}`);
  await shot(`failure-${step.replace(/\W+/g, '-')}.png`, false);
} finally {
  await browser.close();
}
process.exit(code);

// Test-only extension (tests/e2e_vscode/run.sh installs it next to ctx-lsp): checks, from inside a
// real VS Code, what an agent sees. "CTX Probe: Check Tools" lists vscode.lm.tools, invokes each ctx
// tool with vscode.lm.invokeTool on the fixture workspace (answers, a cancelled invocation, bad
// input), calls the @ctx handler (the chat UI needs Copilot, absent offline), starts the published
// MCP server definition and lists its tools. Writes a JSON report to $CTX_PROBE_OUT.
const vscode = require('vscode');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const ISSUE = [
  'Orders placed through the service are sometimes missing from the repository',
  '',
  'When I call OrderService.place_order twice with the same order id, the second order replaces the',
  'first one in Repository.save and the first order is lost. I expected an error.',
  '',
  'Steps: create an OrderService, place order "o-1" with two items, then place "o-1" again; find("o-1")',
  'returns the second order. The storage in shop/models.py should refuse duplicate ids.',
].join('\n');

async function invoke(name, input, token) {
  const r = await vscode.lm.invokeTool(name, { input, toolInvocationToken: undefined }, token);
  return r.content.map((p) => (p instanceof vscode.LanguageModelTextPart ? p.value : typeof p.value === 'string' ? p.value : JSON.stringify(p))).join('');
}

function mcpSession(spec, calls, ms = 60000) {
  // newline-delimited JSON-RPC over the definition's stdio (the MCP stdio transport)
  return new Promise((resolve, reject) => {
    const child = spawn(spec.command, spec.args, { cwd: spec.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    const answers = new Map();
    let buf = '';
    let stderr = '';
    const timer = setTimeout(() => { child.kill(); reject(new Error(`MCP server timed out; stderr: ${stderr.slice(-500)}`)); }, ms);
    const send = (m) => child.stdin.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
    const next = () => {
      const step = calls[answers.size];
      if (!step) {
        clearTimeout(timer);
        child.stdin.end();
        child.kill();
        resolve(answers);
        return;
      }
      send({ id: answers.size + 1, method: step.method, params: step.params });
    };
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', (e) => { clearTimeout(timer); reject(e); });
    child.stdout.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line) continue;
        const msg = JSON.parse(line);
        if (msg.id === undefined) continue;
        answers.set(calls[msg.id - 1].method + (msg.id > 3 ? `#${msg.id}` : ''), msg);
        if (msg.id === 1) send({ method: 'notifications/initialized' });
        next();
      }
    });
    next();
  });
}

async function run(out) {
  const checks = [];
  const check = (name, ok, detail) => checks.push({ name, ok: !!ok, detail });
  const ext = vscode.extensions.getExtension('ctx-lsp.ctx-lsp');
  const api = await ext.activate();
  await api.ready();

  // 1. registration and schemas
  const tools = vscode.lm.tools.filter((t) => t.name.startsWith('ctx_'));
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check('tools registered', ['ctx_getContext', 'ctx_findCallers', 'ctx_neighbours', 'ctx_testsFor'].every((n) => byName[n]), tools.map((t) => t.name));
  check('schemas', tools.every((t) => t.inputSchema && t.inputSchema.type === 'object' && (t.inputSchema.required ?? []).length === 1 && t.description.length > 80 && t.tags.includes('ctx-lsp')),
    tools.map((t) => ({ name: t.name, required: t.inputSchema?.required, tags: t.tags })));

  // 2. answers on the fixture workspace
  const callers = await invoke('ctx_findCallers', { symbol: 'Repository.save' });
  check('callers of Repository.save', /shop\/service\.py:12 OrderService\.place_order/.test(callers), callers);
  const nb = await invoke('ctx_neighbours', { target: 'shop/service.py' });
  check('neighbours of shop/service.py', /IMPORTS ->\n {2}- shop\/models\.py/.test(nb) && /test_place_order_saves_it/.test(nb), nb);
  const tests = await invoke('ctx_testsFor', { symbol: 'Repository.save' });
  check('tests for Repository.save', /tests\/test_service\.py:\d+ test_place_order_saves_it/.test(tests) && /via OrderService\.place_order/.test(tests), tests);
  const pack = await invoke('ctx_getContext', { query: 'who calls save', budget: 1500 });
  check('context for "who calls save"', pack.startsWith('# Context: who calls save') && pack.includes('shop/service.py'), pack.slice(0, 600));

  // 3. a cancelled invocation: the server's retrieval is slowed (CTX_LSP_TEST_CHECKPOINT_DELAY_MS)
  const cts = new vscode.CancellationTokenSource();
  const t0 = Date.now();
  setTimeout(() => cts.cancel(), 500);
  let cancelled;
  try {
    cancelled = { result: await invoke('ctx_getContext', { query: ISSUE }, cts.token) };
  } catch (e) {
    cancelled = { error: `${e?.name}: ${e?.message}` };
  }
  cancelled.ms = Date.now() - t0;
  check('cancelled invocation', (cancelled.result?.startsWith('Cancelled:') || /cancel/i.test(cancelled.error ?? '')) && cancelled.ms < 5000, cancelled);

  // 4. bad input: answered as a result, never thrown
  const bad = [];
  for (const [name, input, expect] of [
    ['ctx_findCallers', {}, /^Error: invalid input for ctx_findCallers: missing required string field 'symbol'/],
    ['ctx_getContext', { query: 'x', budget: -3 }, /^Error: invalid input for ctx_getContext: field 'budget'/],
    ['ctx_findCallers', { symbol: 'Repositry.sav' }, /^No symbol found: unknown symbol: Repositry\.sav; did you mean: Repository\.save/],
    ['ctx_neighbours', { target: '../../etc/passwd.py' }, /outside the workspace folder/],
  ]) {
    let text;
    try {
      text = await invoke(name, input);
    } catch (e) {
      text = `THROWN ${e?.message}`;
    }
    bad.push({ name, input, text, ok: expect.test(text) });
  }
  check('bad input answered as results', bad.every((b) => b.ok), bad);

  // 5. the @ctx participant's handler (no chat UI without Copilot)
  const rec = { markdown: [], anchors: [], references: [], progress: [] };
  const stream = {
    markdown: (v) => rec.markdown.push(typeof v === 'string' ? v : v.value),
    anchor: (loc, title) => rec.anchors.push({ uri: (loc.uri ?? loc).toString(), line: loc.range?.start.line, title }),
    reference: (loc) => rec.references.push((loc.uri ?? loc).toString()),
    progress: (v) => rec.progress.push(v),
  };
  const token = new vscode.CancellationTokenSource().token;
  const res = await api.chatHandler({ prompt: 'who calls save', command: undefined }, { history: [] }, stream, token);
  const md = rec.markdown.join('');
  check('@ctx answers with references, anchors and the pack',
    rec.references.some((u) => u.endsWith('/shop/service.py')) && rec.anchors.some((a) => a.title.startsWith('shop/')) && md.includes('# Context: who calls save') && res.metadata?.items > 0,
    { references: rec.references, anchors: rec.anchors, result: res, chatApi: typeof vscode.chat?.createChatParticipant });
  const rec2 = { markdown: [], anchors: [], references: [], progress: [] };
  await api.chatHandler({ prompt: 'Repository.save', command: 'callers' }, { history: [] }, { ...stream, markdown: (v) => rec2.markdown.push(typeof v === 'string' ? v : v.value), progress: () => {} }, token);
  check('@ctx /callers', rec2.markdown.join('').includes('shop/service.py:12 OrderService.place_order'), rec2.markdown.join(''));

  // 6. the MCP server definition: starts, lists the same tools, answers the same callers
  const specs = api.mcpServers();
  const ws = vscode.workspace.workspaceFolders[0].uri.fsPath;
  check('MCP definition', specs.length === 1 && specs[0].args.join(' ').includes(`-m ctx_lsp mcp --root ${ws}`), specs);
  try {
    const answers = await mcpSession(specs[0], [
      { method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'ctx-probe', version: '0' } } },
      { method: 'tools/list', params: {} },
      { method: 'tools/call', params: { name: 'find_callers', arguments: { symbol: 'Repository.save' } } },
    ]);
    const names = (answers.get('tools/list')?.result?.tools ?? []).map((t) => t.name);
    const call = answers.get('tools/call')?.result?.content?.[0]?.text ?? JSON.stringify(answers.get('tools/call'));
    check('MCP server runs', names.includes('get_context') && names.includes('find_callers') && /shop\/service\.py:12/.test(call), { names, call });
  } catch (e) {
    check('MCP server runs', false, String(e));
  }

  const report = { ok: checks.every((c) => c.ok), checks, vscode: vscode.version };
  fs.writeFileSync(out, JSON.stringify(report, null, 2));
  return report;
}

function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand('ctxProbe.run', async () => {
      const out = process.env.CTX_PROBE_OUT || path.join(os.tmpdir(), 'ctx-probe.json');
      try {
        const r = await run(out);
        const failed = r.checks.filter((c) => !c.ok).map((c) => c.name);
        if (r.ok) void vscode.window.showInformationMessage(`CTX probe: PASS (${r.checks.length} checks)`);
        else void vscode.window.showErrorMessage(`CTX probe: FAIL: ${failed.join(', ')}`);
      } catch (e) {
        fs.writeFileSync(out, JSON.stringify({ ok: false, error: String(e?.stack ?? e) }, null, 2));
        void vscode.window.showErrorMessage(`CTX probe: FAIL: ${e?.message ?? e}`);
      }
    }),
  );
}

module.exports = { activate };

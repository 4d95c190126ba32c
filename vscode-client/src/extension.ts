// ctx-lsp VS Code client: starts `<python> -m ctx_lsp serve`, shows context packs, architectural
// neighbours and index status. No telemetry, no network access.
import * as vscode from 'vscode';
import * as path from 'node:path';
import * as os from 'node:os';
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  WorkDoneProgress,
  WorkDoneProgressBegin,
  WorkDoneProgressCreateRequest,
  WorkDoneProgressReport,
  WorkDoneProgressEnd,
  WorkDoneProgressCancelNotification,
} from 'vscode-languageclient/node';
import { expandPath, initializationOptions, InitializationOptions, RESTART_KEYS, serverSettings, shellQuote } from './config';
import { ContextPack } from './contextPack';
import { ContextPanel } from './contextView';
import { checkCtxLsp, Interpreter, pythonExtensionApi, resolveInterpreter } from './interpreter';
import { openPath } from './locations';
import { ArchitecturalContext, Target } from './neighbours';
import { NeighboursProvider } from './neighboursView';
import { IndexStatus, statusView } from './status';
import { makeChatHandler, registerParticipant } from './chat';
import { GraphPanel } from './graphView';
import { mcpSpecs, registerMcpProvider } from './mcp';
import { CtxServer, registerTools, TOOL_NAMES } from './tools';
import { Neighbourhood, titleOf } from './toolText';
import { workingEditor } from './workingEditor';

const CLIENT_ID = 'ctxLsp';
const CLIENT_NAME = 'ctx-lsp';

let manager: ServerManager | undefined;

function settings(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration('ctxLsp', vscode.workspace.workspaceFolders?.[0]?.uri);
}

function currentInitOptions(scope?: vscode.Uri): InitializationOptions {
  const cfg = vscode.workspace.getConfiguration('ctxLsp', scope ?? vscode.workspace.workspaceFolders?.[0]?.uri);
  const folder = scope ? vscode.workspace.getWorkspaceFolder(scope) : vscode.workspace.workspaceFolders?.[0];
  return initializationOptions((k) => cfg.get(k), (s) => expandPath(s, { home: os.homedir(), workspaceFolder: folder?.uri.fsPath, env: process.env }));
}

/** The settings sent to the server as written: it checks them and warns about an invalid one. */
function currentServerSettings(scope?: vscode.Uri): Record<string, unknown> {
  const cfg = vscode.workspace.getConfiguration('ctxLsp', scope ?? vscode.workspace.workspaceFolders?.[0]?.uri);
  const folder = scope ? vscode.workspace.getWorkspaceFolder(scope) : vscode.workspace.workspaceFolders?.[0];
  return serverSettings((k) => cfg.get(k), (s) => expandPath(s, { home: os.homedir(), workspaceFolder: folder?.uri.fsPath, env: process.env }));
}

class StatusBar implements vscode.Disposable {
  readonly item = vscode.window.createStatusBarItem('ctxLsp.status', vscode.StatusBarAlignment.Left, 50);
  status: IndexStatus | undefined;
  progress: { title?: string; message?: string; percentage?: number; token?: string | number; cancellable?: boolean } | undefined;

  constructor() {
    this.item.name = 'ctx-lsp';
    this.item.command = 'ctxLsp.statusMenu';
    this.starting();
    this.item.show();
  }

  starting(): void {
    this.status = undefined;
    this.progress = undefined;
    this.item.text = '$(sync~spin) ctx: starting…';
    this.item.tooltip = 'ctx-lsp: starting the language server';
    this.item.backgroundColor = undefined;
  }

  stopped(message: string): void {
    this.status = undefined;
    this.progress = undefined;
    this.item.text = '$(error) ctx: not running';
    this.item.tooltip = `ctx-lsp: ${message}\nClick for actions`;
    this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
  }

  update(status?: IndexStatus): void {
    if (status) this.status = status;
    const v = statusView(this.status, this.progress);
    this.item.text = v.text;
    this.item.tooltip = v.tooltip;
    this.item.backgroundColor = v.warning ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}

class ServerManager implements vscode.Disposable {
  client: LanguageClient | undefined;
  interpreter: Interpreter | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private queue: Promise<void> = Promise.resolve();
  private clientDisposables: vscode.Disposable[] = [];
  private missingNotified = new Set<string>();
  private readonly interpreterChanged = new vscode.EventEmitter<void>();
  /** Fires when the interpreter (hence the MCP server definition) may have changed. */
  readonly onDidChangeInterpreter = this.interpreterChanged.event;

  constructor(
    readonly out: vscode.OutputChannel,
    readonly status: StatusBar,
  ) {}

  log(msg: string): void {
    this.out.appendLine(`[${new Date().toISOString()}] ${msg}`);
  }

  /** Serialised start/stop/restart. */
  private enqueue(fn: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(fn, fn).catch((e) => this.log(`error: ${e instanceof Error ? e.stack ?? e.message : e}`));
    return this.queue;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  /** Resolves once a pending start/restart has finished (the server may still not be running). */
  ready(): Promise<void> {
    return this.queue;
  }

  restart(reason: string): Promise<void> {
    return this.enqueue(async () => {
      this.log(`Restarting the server (${reason})`);
      this.missingNotified.clear();
      await this.doStop();
      await this.doStart();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  private async doStart(): Promise<void> {
    this.status.starting();
    const folder = vscode.workspace.workspaceFolders?.[0];
    const py = await resolveInterpreter((m) => this.log(m));
    const before = this.interpreter && [this.interpreter.command, ...this.interpreter.args].join(' ');
    this.interpreter = py;
    if (before !== [py.command, ...py.args].join(' ')) this.interpreterChanged.fire();
    const pyLabel = [py.command, ...py.args].join(' ');
    this.log(`Interpreter: ${pyLabel} (from ${py.source === 'setting' ? 'ctxLsp.interpreter' : py.source === 'python-extension' ? 'the Python extension' : 'the default'})`);
    const check = await checkCtxLsp(py, folder?.uri.fsPath);
    if (!check.ok) {
      this.log(`Cannot start: ${check.reason}: ${check.detail}`);
      this.status.stopped(check.reason === 'missing-module' ? `ctx_lsp is not installed for ${pyLabel}` : check.detail);
      void this.notifyCannotStart(py, check.reason, check.detail);
      return;
    }
    this.log(`ctx_lsp ${check.version} found`);
    const initOptions = currentServerSettings();
    const args = [...py.args, '-m', 'ctx_lsp', 'serve'];
    const serverOptions: ServerOptions = {
      command: py.command,
      args, // no `transport`: stdio without the extra `--stdio` argument TransportKind.stdio adds
      options: { cwd: folder?.uri.fsPath, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { scheme: 'untitled', language: 'python' },
      ],
      initializationOptions: initOptions,
      outputChannel: this.out,
      traceOutputChannel: this.out,
      revealOutputChannelOn: 4 /* RevealOutputChannelOn.Never */,
      middleware: {
        workspace: {
          // The server pulls section "ctx" (or ctx.<key>); our settings live under "ctxLsp".
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            if (!Array.isArray(result)) return result;
            return params.items.map((item, i) => {
              const section = item.section ?? '';
              if (section === 'ctx' || section === 'ctxLsp' || section.startsWith('ctx.') || section.startsWith('ctxLsp.')) {
                const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
                const opts = currentServerSettings(scope);
                const key = section.includes('.') ? section.slice(section.indexOf('.') + 1) : '';
                return key ? (opts[key] ?? null) : opts;
              }
              return result[i];
            });
          },
        },
        // Code lenses carry the server command ctx.contextAtCursor: show its pack in our view.
        provideCodeLenses: async (doc, token, next) => {
          const lenses = await next(doc, token);
          return lenses?.map(rewriteLens);
        },
        resolveCodeLens: async (lens, token, next) => {
          const r = await next(lens, token);
          return r ? rewriteLens(r) : r;
        },
      },
    };
    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
    this.client = client;
    this.clientDisposables.push(
      client.onDidChangeState((e) => {
        if (e.newState === State.Stopped && this.client === client) this.status.stopped('the server stopped (see the ctx-lsp output)');
        if (e.newState === State.Running && this.client === client) this.poll(500);
      }),
      client.onNotification('ctx/indexUpdated', (s: IndexStatus) => {
        this.status.progress = undefined;
        this.status.update(s);
        this.poll(s?.indexing ? 1500 : 60000);
      }),
    );
    this.log(`Starting: ${[py.command, ...args].join(' ')} with ${JSON.stringify(initOptions)}`);
    try {
      await client.start();
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      this.log(`Server failed to start: ${msg}`);
      this.status.stopped(msg);
      void vscode.window.showErrorMessage(`ctx-lsp: the server failed to start: ${msg}`, 'Show Output', 'Restart').then((a) => {
        if (a === 'Show Output') this.out.show(true);
        if (a === 'Restart') void this.restart('user request');
      });
      return;
    }
    this.trackProgress(client);
    this.log('Server running');
    this.poll(200);
  }

  /** Work-done progress ("ctx-lsp: indexing", "ctx-lsp: waiting for git") -> the status bar item
   *  (what it does, percentage, message). */
  private trackProgress(client: LanguageClient): void {
    client.onRequest(WorkDoneProgressCreateRequest.type, (params) => {
      const sub = client.onProgress(WorkDoneProgress.type, params.token, (v: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd) => {
        if (v.kind === 'begin') {
          this.status.progress = { title: v.title, message: v.message ?? v.title, percentage: v.percentage, token: params.token, cancellable: v.cancellable };
        } else if (v.kind === 'report') {
          const p = this.status.progress;
          this.status.progress = { title: p?.title, message: v.message ?? p?.message, percentage: v.percentage ?? p?.percentage, token: params.token, cancellable: v.cancellable ?? p?.cancellable };
        } else {
          this.status.progress = undefined;
          sub.dispose();
          this.poll(100);
        }
        this.status.update();
      });
    });
  }

  /** Polls ctx.indexStatus after `delay` ms; keeps polling quickly while indexing. */
  poll(delay: number): void {
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(async () => {
      this.pollTimer = undefined;
      if (!this.running) return;
      try {
        const s = (await this.execute('ctx.indexStatus', {})) as IndexStatus;
        this.status.update(s);
        this.poll(s?.indexing || this.status.progress ? 1500 : 60000);
      } catch (e) {
        this.log(`ctx.indexStatus failed: ${e instanceof Error ? e.message : e}`);
        this.poll(5000);
      }
    }, delay);
  }

  /** Cancels the running indexing (work-done progress cancel). */
  cancelIndexing(): void {
    const token = this.status.progress?.token;
    if (token !== undefined && this.client && this.running) {
      void this.client.sendNotification(WorkDoneProgressCancelNotification.type, { token });
    } else {
      void vscode.window.showInformationMessage('CTX: nothing is being indexed now.');
    }
  }

  /** A context request: the cancellable custom request (`ctx/getContext`, ...) when the server
   * advertises it in capabilities.experimental.ctxRequests, else the workspace/executeCommand command. */
  async contextRequest(method: 'ctx/getContext' | 'ctx/contextAtCursor', command: string, params: object, token?: vscode.CancellationToken): Promise<unknown> {
    const client = this.client;
    if (!client || client.state !== State.Running) throw new NotRunningError();
    const experimental = client.initializeResult?.capabilities.experimental as { ctxRequests?: unknown } | undefined;
    if (Array.isArray(experimental?.ctxRequests) && experimental.ctxRequests.includes(method)) {
      return client.sendRequest(method, params, token);
    }
    return this.execute(command, params, token);
  }

  async execute(command: string, params: object, token?: vscode.CancellationToken): Promise<unknown> {
    const client = this.client;
    if (!client || client.state !== State.Running) throw new NotRunningError();
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [params] }, token);
  }

  private async notifyCannotStart(py: Interpreter, reason: string, detail: string): Promise<void> {
    const label = [py.command, ...py.args].join(' ');
    if (this.missingNotified.has(label + reason)) return;
    this.missingNotified.add(label + reason);
    const hasPythonExt = !!vscode.extensions.getExtension('ms-python.python');
    const select = hasPythonExt ? 'Select Interpreter' : 'Open Settings';
    let action: string | undefined;
    if (reason === 'missing-module') {
      action = await vscode.window.showErrorMessage(
        `ctx-lsp: the Python package ctx-lsp is not installed for ${label}. Install it, or choose another interpreter (setting ctxLsp.interpreter).`,
        'Install ctx-lsp',
        select,
        'Show Output',
      );
    } else if (reason === 'not-found') {
      action = await vscode.window.showErrorMessage(`ctx-lsp: cannot run the Python interpreter "${label}" (${detail}). Set ctxLsp.interpreter.`, select, 'Show Output');
    } else {
      action = await vscode.window.showErrorMessage(`ctx-lsp: "${label} -c 'import ctx_lsp'" failed: ${detail.split('\n').slice(-1)[0]}`, 'Install ctx-lsp', select, 'Show Output');
    }
    if (action === 'Install ctx-lsp') this.installCtxLsp(py);
    else if (action === 'Select Interpreter') void vscode.commands.executeCommand('python.setInterpreter');
    else if (action === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'ctxLsp.interpreter');
    else if (action === 'Show Output') this.out.show(true);
  }

  installCtxLsp(py: Interpreter): void {
    const win = process.platform === 'win32';
    const cmd = [py.command, ...py.args, '-m', 'pip', 'install', 'ctx-lsp'].map((a) => shellQuote(a, win)).join(' ');
    const term = vscode.window.createTerminal({ name: 'Install ctx-lsp', cwd: vscode.workspace.workspaceFolders?.[0]?.uri });
    term.show();
    term.sendText(cmd, true);
    this.log(`Installing in a terminal: ${cmd}`);
    void vscode.window.showInformationMessage('ctx-lsp: when the installation in the terminal has finished, restart the server.', 'Restart Server').then((a) => {
      if (a) void this.restart('after installing ctx-lsp');
    });
  }

  private async doStop(): Promise<void> {
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
    const client = this.client;
    this.client = undefined;
    for (const d of this.clientDisposables) d.dispose();
    this.clientDisposables = [];
    if (client) {
      try {
        if (client.needsStop()) await client.stop(5000);
      } catch (e) {
        this.log(`stop: ${e instanceof Error ? e.message : e}`);
      }
      try {
        await client.dispose(2000);
      } catch {
        /* already stopped */
      }
    }
  }

  dispose(): void {
    this.interpreterChanged.dispose();
    void this.stop();
  }
}

class NotRunningError extends Error {
  constructor() {
    super('the ctx-lsp server is not running');
  }
}

function rewriteLens(lens: vscode.CodeLens): vscode.CodeLens {
  if (lens.command?.command === 'ctx.contextAtCursor') {
    lens.command = { ...lens.command, command: 'ctxLsp.contextAtCursor' };
  }
  return lens;
}

async function reportError(e: unknown, what: string): Promise<void> {
  const m = manager;
  if (e instanceof NotRunningError) {
    const a = await vscode.window.showErrorMessage(`CTX: ${what}: the ctx-lsp server is not running.`, 'Restart Server', 'Show Output');
    if (a === 'Restart Server') void m?.restart('user request');
    if (a === 'Show Output') m?.out.show(true);
    return;
  }
  const msg = e instanceof Error ? e.message : String(e);
  m?.log(`${what} failed: ${msg}`);
  const a = await vscode.window.showErrorMessage(`CTX: ${what} failed: ${msg}`, 'Show Output');
  if (a) m?.out.show(true);
}

/** The public API of the extension (the e2e probe uses it; so can other extensions). */
export interface CtxLspApi {
  /** The @ctx participant's request handler (callable where the chat UI is absent). */
  chatHandler: ReturnType<typeof makeChatHandler>;
  tools: readonly string[];
  /** The MCP server definitions published to VS Code. */
  mcpServers(): ReturnType<typeof mcpSpecs>;
  /** Resolves once the language server started (or failed to). */
  ready(): Promise<void>;
}

/** A multi-line input: an untitled Markdown document for the task text; "CTX: Context for
 * Selection" (its editor title button) sends it, or the selected part of it. */
async function openTaskDocument(initial: string): Promise<void> {
  const hint = '<!-- CTX task: paste or write it below, then run "CTX: Context for Selection" (the search button above); the whole document, or the selected text, is the query. -->\n\n';
  const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content: hint + (initial.trim() ? initial.trim() + '\n' : '') });
  const ed = await vscode.window.showTextDocument(doc, { preview: false });
  const end = doc.lineAt(doc.lineCount - 1).range.end;
  ed.selection = new vscode.Selection(end, end);
}

/** The task text of a document: without the hint comment of openTaskDocument. */
function taskText(doc: vscode.TextDocument, range?: vscode.Range): string {
  return doc.getText(range).replace(/<!--[\s\S]*?-->/g, '').trim();
}

export async function activate(context: vscode.ExtensionContext): Promise<CtxLspApi> {
  const out = vscode.window.createOutputChannel('ctx-lsp');
  const status = new StatusBar();
  const mgr = new ServerManager(out, status);
  manager = mgr;
  const panel = new ContextPanel();
  // The editor the user was last in: a question asked from the context panel (a webview has the
  // focus, so there is no active text editor) stays anchored there, and in its workspace folder.
  let lastEditor = vscode.window.activeTextEditor;
  context.subscriptions.push(vscode.window.onDidChangeActiveTextEditor((ed) => { if (ed) lastEditor = ed; }));
  const currentEditor = (): vscode.TextEditor | undefined =>
    workingEditor(vscode.window.activeTextEditor, lastEditor, vscode.window.visibleTextEditors);
  const neighbours = new NeighboursProvider();
  const tree = vscode.window.createTreeView('ctxLsp.neighbours', { treeDataProvider: neighbours, showCollapseAll: true });
  const graphPanel = new GraphPanel(context.extensionUri);
  context.subscriptions.push(out, status, mgr, panel, tree, graphPanel);

  // Language-model tools, @ctx and the MCP definition: all over the running server.
  const server = async (): Promise<CtxServer | undefined> => {
    await mgr.ready();
    if (!mgr.running) return undefined;
    return {
      getContext: (params, token) => mgr.contextRequest('ctx/getContext', 'ctx.getContext', params, token) as Promise<ContextPack>,
      execute: (command, params, token) => mgr.execute(command, params, token),
      defaultBudget: () => currentInitOptions().budget,
    };
  };
  const chatHandler = makeChatHandler(server);
  const mcpServers = () => {
    const o = currentInitOptions();
    return mcpSpecs(mgr.interpreter, vscode.workspace.workspaceFolders ?? [], { cacheDir: o.cacheDir || undefined, include: o.include, exclude: o.exclude });
  };
  const mcpChanged = new vscode.EventEmitter<void>();
  context.subscriptions.push(
    mcpChanged,
    mgr.onDidChangeInterpreter(() => mcpChanged.fire()),
    vscode.workspace.onDidChangeWorkspaceFolders(() => mcpChanged.fire()),
    ...registerTools(server, (m) => mgr.log(m)),
    ...registerParticipant(chatHandler, (m) => mgr.log(m)),
    ...registerMcpProvider(mcpServers, mcpChanged.event, String(context.extension.packageJSON.version ?? ''), (m) => mgr.log(m)),
  );

  let lastQuery = context.workspaceState.get<string>('ctxLsp.lastQuery', '');

  const getContext = async (query?: string, budget?: number): Promise<ContextPack | undefined> => {
    if (typeof query !== 'string' || !query.trim()) {
      query = await askQuery(lastQuery);
    }
    if (!query?.trim()) return undefined;
    query = query.trim();
    lastQuery = query;
    void context.workspaceState.update('ctxLsp.lastQuery', query);
    const b = typeof budget === 'number' ? budget : currentInitOptions().budget;
    const params: { query: string; budget: number; uri?: string; position?: { line: number; character: number } } = { query, budget: b };
    // Anchor the query to the Python file the user is in (it must be inside a workspace folder).
    const ed = currentEditor();
    const client = mgr.client;
    if (client && ed && ed.document.languageId === 'python' && ed.document.uri.scheme === 'file' && vscode.workspace.getWorkspaceFolder(ed.document.uri)) {
      params.uri = client.code2ProtocolConverter.asUri(ed.document.uri);
      params.position = client.code2ProtocolConverter.asPosition(ed.selection.active);
    }
    let cancelled = false;
    try {
      const pack = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `CTX: retrieving context for "${titleOf(query)}"…`, cancellable: true },
        (_p, token) => {
          token.onCancellationRequested(() => (cancelled = true));
          return mgr.contextRequest('ctx/getContext', 'ctx.getContext', params, token) as Promise<ContextPack>;
        },
      );
      if (pack) panel.show(pack, titleOf(query));
      return pack;
    } catch (e) {
      if (!cancelled) await reportError(e, 'Get Context');
      return undefined;
    }
  };

  /** The query input: one line, or (button / Ctrl+Enter style) a multi-line task document. */
  const askQuery = (value: string): Promise<string | undefined> =>
    new Promise((resolve) => {
      const box = vscode.window.createInputBox();
      const multi: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon('note'), tooltip: 'Multi-line: write or paste a task (e.g. an issue) in an editor' };
      box.title = 'CTX: Get Context';
      box.prompt = 'What do you need context for? A question, a task or a symbol (e.g. "who calls save"). For a long task (an issue), use the multi-line button.';
      box.placeholder = 'who calls save';
      box.value = value.includes('\n') ? '' : value;
      box.ignoreFocusOut = true;
      box.buttons = [multi];
      let done = false;
      const finish = (v: string | undefined) => {
        if (done) return;
        done = true;
        resolve(v);
        box.dispose();
      };
      box.onDidAccept(() => finish(box.value));
      box.onDidHide(() => finish(undefined));
      box.onDidTriggerButton((b) => {
        if (b !== multi) return;
        const v = box.value;
        finish(undefined);
        void openTaskDocument(v);
      });
      box.show();
    });

  const contextForSelection = async (): Promise<ContextPack | undefined> => {
    const ed = vscode.window.activeTextEditor;
    if (!ed) {
      void vscode.window.showWarningMessage('CTX: select the task text (e.g. a pasted issue) in an editor first.');
      return undefined;
    }
    let text = ed.selections.filter((sel) => !sel.isEmpty).map((sel) => taskText(ed.document, sel)).join('\n\n').trim();
    if (!text && ed.document.languageId !== 'python') text = taskText(ed.document); // a task document: all of it
    if (!text) {
      void vscode.window.showWarningMessage('CTX: select the text to use as the query (in a Python file, a selection is needed).');
      return undefined;
    }
    return getContext(text);
  };

  const showGraph = async (arg?: vscode.Uri | string): Promise<Neighbourhood | undefined> => {
    const client = mgr.client;
    let params: { target?: string; uri?: string; position?: { line: number; character: number } };
    const ed = vscode.window.activeTextEditor;
    if (typeof arg === 'string') params = { target: arg };
    else if (arg instanceof vscode.Uri) params = { uri: client ? client.code2ProtocolConverter.asUri(arg) : arg.toString() };
    else if (ed && ed.document.uri.scheme === 'file' && vscode.workspace.getWorkspaceFolder(ed.document.uri)) {
      const uri = client ? client.code2ProtocolConverter.asUri(ed.document.uri) : ed.document.uri.toString();
      const position = client ? client.code2ProtocolConverter.asPosition(ed.selection.active) : ed.selection.active;
      params = { uri, position };
    } else {
      void vscode.window.showWarningMessage('CTX: open a Python file (the graph shows the symbol at the cursor, or the file).');
      return undefined;
    }
    try {
      let g = (await mgr.execute('ctx.neighbourhood', params)) as Neighbourhood;
      if (!g.center && params.position) g = (await mgr.execute('ctx.neighbourhood', { uri: params.uri })) as Neighbourhood; // not on a symbol: the file
      graphPanel.show(g);
      return g;
    } catch (e) {
      await reportError(e, 'Show Graph');
      return undefined;
    }
  };

  const contextAtCursor = async (arg?: { uri?: string; position?: { line: number; character: number }; budget?: number }): Promise<ContextPack | undefined> => {
    let uri = arg?.uri;
    let position = arg?.position;
    let title: string;
    const client = mgr.client;
    if (!uri || !position) {
      const editor = vscode.window.activeTextEditor;
      if (!editor) {
        void vscode.window.showWarningMessage('CTX: open a Python file and place the cursor on a symbol.');
        return undefined;
      }
      uri = client ? client.code2ProtocolConverter.asUri(editor.document.uri) : editor.document.uri.toString();
      position = client ? client.code2ProtocolConverter.asPosition(editor.selection.active) : { line: editor.selection.active.line, character: editor.selection.active.character };
      const word = editor.document.getText(editor.document.getWordRangeAtPosition(editor.selection.active));
      title = `${word || path.basename(editor.document.uri.fsPath)} (${path.basename(editor.document.uri.fsPath)}:${position.line + 1})`;
    } else {
      title = `${path.basename(vscode.Uri.parse(uri).path)}:${position.line + 1}`;
    }
    const budget = typeof arg?.budget === 'number' ? arg.budget : currentInitOptions().budget;
    let cancelled = false;
    try {
      const pack = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: 'CTX: retrieving context at cursor…', cancellable: true },
        (_p, token) => {
          token.onCancellationRequested(() => (cancelled = true));
          return mgr.contextRequest('ctx/contextAtCursor', 'ctx.contextAtCursor', { uri, position, budget }, token) as Promise<ContextPack>;
        },
      );
      if (pack) panel.show(pack, pack.query || title, { preserveFocus: true });
      return pack;
    } catch (e) {
      if (!cancelled) await reportError(e, 'Context at Cursor');
      return undefined;
    }
  };

  const showNeighbours = async (arg?: vscode.Uri | string, opts?: { quiet?: boolean }): Promise<ArchitecturalContext | undefined> => {
    let fileUri: vscode.Uri | undefined = typeof arg === 'string' ? vscode.Uri.parse(arg) : arg instanceof vscode.Uri ? arg : undefined;
    fileUri ??= vscode.window.activeTextEditor?.document.uri;
    if (!fileUri) {
      if (!opts?.quiet) void vscode.window.showWarningMessage('CTX: open a file (or pick one in the Explorer) to show its architectural neighbours.');
      return undefined;
    }
    const client = mgr.client;
    const uri = client ? client.code2ProtocolConverter.asUri(fileUri) : fileUri.toString();
    try {
      const result = (await mgr.execute('ctx.architecturalContext', { uri })) as ArchitecturalContext;
      neighbours.set(result ?? {}, fileUri);
      const name = result?.path ?? path.basename(fileUri.fsPath);
      tree.description = name;
      const n = neighbours.count;
      tree.message = n ? undefined : `No architectural neighbours for ${name}.${result?.reason ? ' ' + result.reason : ''}`;
      if (!opts?.quiet) await vscode.commands.executeCommand('ctxLsp.neighbours.focus');
      return result;
    } catch (e) {
      if (!opts?.quiet) await reportError(e, 'Show Architectural Neighbours');
      return undefined;
    }
  };

  context.subscriptions.push(
    vscode.commands.registerCommand('ctxLsp.getContext', getContext),
    vscode.commands.registerCommand('ctxLsp.contextAtCursor', contextAtCursor),
    vscode.commands.registerCommand('ctxLsp.contextForSelection', contextForSelection),
    vscode.commands.registerCommand('ctxLsp.showGraph', showGraph),
    vscode.commands.registerCommand('ctxLsp.showNeighbours', (arg?: vscode.Uri | string) => showNeighbours(arg)),
    vscode.commands.registerCommand('ctxLsp.refreshNeighbours', () => showNeighbours(neighbours.fileUri)),
    vscode.commands.registerCommand('ctxLsp.openLocation', (t: Target) => openPath(t.path, t.uri, t.line, undefined, { viewColumn: panel.editorColumn(), character: t.character })),
    vscode.commands.registerCommand('ctxLsp.restart', () => mgr.restart('CTX: Restart Server')),
    vscode.commands.registerCommand('ctxLsp.showOutput', () => out.show(true)),
    vscode.commands.registerCommand('ctxLsp.cancelIndexing', () => mgr.cancelIndexing()),
    vscode.commands.registerCommand('ctxLsp.reindex', async () => {
      try {
        status.progress = { message: 'reindexing' };
        status.update();
        const s = (await vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: 'ctx-lsp: reindexing' }, () => mgr.execute('ctx.reindex', {}))) as IndexStatus;
        status.progress = undefined;
        status.update(s);
        mgr.poll(1500);
        return s;
      } catch (e) {
        status.progress = undefined;
        status.update();
        await reportError(e, 'Reindex');
        return undefined;
      }
    }),
    vscode.commands.registerCommand('ctxLsp.statusMenu', async () => {
      const items: (vscode.QuickPickItem & { cmd: string })[] = [
        { label: '$(search) Get Context…', cmd: 'ctxLsp.getContext' },
        { label: '$(type-hierarchy) Show Architectural Neighbours', cmd: 'ctxLsp.showNeighbours' },
        { label: '$(graph) Show Graph', cmd: 'ctxLsp.showGraph' },
        ...(status.progress?.token !== undefined && status.progress.cancellable !== false ? [{ label: '$(close) Cancel Indexing', cmd: 'ctxLsp.cancelIndexing' }] : []),
        { label: '$(refresh) Reindex Workspace', cmd: 'ctxLsp.reindex' },
        { label: '$(debug-restart) Restart Server', cmd: 'ctxLsp.restart' },
        { label: '$(output) Show Server Output', cmd: 'ctxLsp.showOutput' },
        { label: '$(gear) Settings', cmd: 'workbench.action.openSettings' },
      ];
      const pick = await vscode.window.showQuickPick(items, { title: status.item.tooltip?.toString().split('\n')[0] ?? 'ctx-lsp' });
      if (pick) await vscode.commands.executeCommand(pick.cmd, ...(pick.cmd === 'workbench.action.openSettings' ? ['ctxLsp'] : []));
    }),
  );

  // Restart when the interpreter or any server setting changes (tracing is applied live).
  let restartTimer: NodeJS.Timeout | undefined;
  const scheduleRestart = (why: string) => {
    if (restartTimer) clearTimeout(restartTimer);
    restartTimer = setTimeout(() => void mgr.restart(why), 500);
  };
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      const changed = RESTART_KEYS.filter((k) => e.affectsConfiguration(`ctxLsp.${k}`));
      if (changed.length) scheduleRestart(`setting ${changed.map((k) => 'ctxLsp.' + k).join(', ')} changed`);
      else if (e.affectsConfiguration('python.defaultInterpreterPath') && !settings().get<string>('interpreter')) scheduleRestart('python.defaultInterpreterPath changed');
    }),
    { dispose: () => restartTimer && clearTimeout(restartTimer) },
  );
  void pythonExtensionApi().then((api) => {
    const onEnv = api?.environments?.onDidChangeActiveEnvironmentPath ?? api?.settings?.onDidChangeExecutionDetails;
    if (onEnv) {
      context.subscriptions.push(
        onEnv(() => {
          if (!settings().get<string>('interpreter')) scheduleRestart('the Python extension changed the active interpreter');
        }),
      );
    }
  });

  // Keep the neighbours view on the active file while it is visible.
  context.subscriptions.push(
    vscode.window.onDidChangeActiveTextEditor((ed) => {
      if (!tree.visible || !ed || ed.document.languageId !== 'python' || ed.document.uri.scheme !== 'file') return;
      if (neighbours.fileUri?.toString() === ed.document.uri.toString()) return;
      void showNeighbours(ed.document.uri, { quiet: true });
    }),
  );

  void mgr.start();
  return { chatHandler, tools: TOOL_NAMES, mcpServers, ready: () => mgr.ready() };
}

export async function deactivate(): Promise<void> {
  await manager?.stop();
}

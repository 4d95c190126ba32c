// Language-model tools (VS Code's Language Model Tools API): the server's context, callers,
// neighbourhood and tests, for agent mode and chat (`#ctxContext`, ...). Declared in package.json
// `contributes.languageModelTools`. Errors and cancellation are answered as tool results, never thrown.
import * as vscode from 'vscode';
import { ContextPack, packToMarkdown } from './contextPack';
import { checkInput, GetContextInput, Neighbourhood, neighbourhoodText, relationsText, SymbolInput, SymbolRelations, TargetInput, titleOf } from './toolText';

/** What the tools need from the running language server. */
export interface CtxServer {
  /** The cancellable `ctx/getContext` request (falls back to the command). */
  getContext(params: { query: string; budget: number }, token?: vscode.CancellationToken): Promise<ContextPack>;
  /** A `ctx.*` command (`workspace/executeCommand`), cancelled with `$/cancelRequest`. */
  execute(command: string, params: object, token?: vscode.CancellationToken): Promise<unknown>;
  defaultBudget(): number;
}

export const TOOL_NAMES = ['ctx_getContext', 'ctx_findCallers', 'ctx_neighbours', 'ctx_testsFor'] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

function text(s: string): vscode.LanguageModelToolResult {
  return new vscode.LanguageModelToolResult([new vscode.LanguageModelTextPart(s)]);
}

function failure(e: unknown, token: vscode.CancellationToken): vscode.LanguageModelToolResult {
  if (token.isCancellationRequested || e instanceof vscode.CancellationError) return text('Cancelled: the ctx-lsp request was cancelled before it finished; nothing was retrieved.');
  const msg = e instanceof Error ? e.message : String(e);
  return text(`Error: ${msg}`);
}

/** The answer of one tool as text (exported for the @ctx participant's commands). */
export async function runTool(server: CtxServer, name: ToolName, input: unknown, token: vscode.CancellationToken): Promise<string> {
  switch (name) {
    case 'ctx_getContext': {
      const i = input as GetContextInput;
      const pack = await server.getContext({ query: i.query.trim(), budget: i.budget ?? server.defaultBudget() }, token);
      return packToMarkdown(pack);
    }
    case 'ctx_findCallers':
    case 'ctx_testsFor': {
      const i = input as SymbolInput;
      const relation = name === 'ctx_findCallers' ? 'callers' : 'tests';
      const r = (await server.execute('ctx.symbolRelations', { symbol: i.symbol.trim(), relation }, token)) as SymbolRelations;
      return relationsText(i.symbol.trim(), r);
    }
    case 'ctx_neighbours': {
      const i = input as TargetInput;
      const g = (await server.execute('ctx.neighbourhood', { target: i.target.trim() }, token)) as Neighbourhood;
      return neighbourhoodText(i.target.trim(), g);
    }
  }
}

function invocationMessage(name: ToolName, input: Record<string, unknown>): string {
  const s = (k: string) => (typeof input?.[k] === 'string' ? (input[k] as string) : '');
  switch (name) {
    case 'ctx_getContext':
      return `Retrieving context for "${titleOf(s('query'))}"`;
    case 'ctx_findCallers':
      return `Finding the callers of ${s('symbol')}`;
    case 'ctx_testsFor':
      return `Finding the tests of ${s('symbol')}`;
    case 'ctx_neighbours':
      return `Reading the graph neighbourhood of ${s('target')}`;
  }
}

class CtxTool implements vscode.LanguageModelTool<Record<string, unknown>> {
  constructor(
    private readonly name: ToolName,
    private readonly server: () => Promise<CtxServer | undefined>,
  ) {}

  prepareInvocation(options: vscode.LanguageModelToolInvocationPrepareOptions<Record<string, unknown>>): vscode.PreparedToolInvocation {
    return { invocationMessage: invocationMessage(this.name, options.input) };
  }

  async invoke(options: vscode.LanguageModelToolInvocationOptions<Record<string, unknown>>, token: vscode.CancellationToken): Promise<vscode.LanguageModelToolResult> {
    const bad = checkInput(this.name, options.input);
    if (bad) return text(`Error: invalid input for ${this.name}: ${bad}`);
    const server = await this.server();
    if (!server) return text('Error: the ctx-lsp language server is not running (see the ctx-lsp output; CTX: Restart Server).');
    try {
      return text(await runTool(server, this.name, options.input, token));
    } catch (e) {
      return failure(e, token);
    }
  }
}

/** Registers the tools when this VS Code has the Language Model Tools API (feature-detected). */
export function registerTools(server: () => Promise<CtxServer | undefined>, log: (m: string) => void): vscode.Disposable[] {
  const lm = vscode.lm as Partial<typeof vscode.lm> | undefined;
  if (typeof lm?.registerTool !== 'function') {
    log('This VS Code has no vscode.lm.registerTool: the language-model tools are not registered.');
    return [];
  }
  return TOOL_NAMES.map((name) => lm.registerTool!(name, new CtxTool(name, server)));
}

// The @ctx chat participant: answers with the context pack, its spans as references and anchors
// (so the user sees which code was chosen and why), then the pack's Markdown. Its commands
// /callers, /tests and /neighbours answer like the language-model tools.
import * as vscode from 'vscode';
import { ContextPack, packToMarkdown, reasonLabel, spanLabel } from './contextPack';
import { resolvePath } from './locations';
import { CtxServer, runTool, ToolName } from './tools';
import { checkInput } from './toolText';

export const PARTICIPANT_ID = 'ctx-lsp.ctx';

/** The slice of vscode.ChatResponseStream the handler uses (lets tests pass a recorder). */
export type Stream = Pick<vscode.ChatResponseStream, 'markdown' | 'anchor' | 'reference' | 'progress'>;

const COMMAND_TOOLS: Record<string, { tool: ToolName; field: string }> = {
  callers: { tool: 'ctx_findCallers', field: 'symbol' },
  tests: { tool: 'ctx_testsFor', field: 'symbol' },
  neighbours: { tool: 'ctx_neighbours', field: 'target' },
};

async function itemLocation(path: string, uri: string | null | undefined, start: number, end: number): Promise<vscode.Location | undefined> {
  const target = await resolvePath(path, uri);
  if (!target) return undefined;
  return new vscode.Location(target, new vscode.Range(Math.max(0, start - 1), 0, Math.max(0, end - 1), Number.MAX_SAFE_INTEGER));
}

export function makeChatHandler(server: () => Promise<CtxServer | undefined>) {
  return async (
    request: Pick<vscode.ChatRequest, 'prompt' | 'command'>,
    _context: unknown,
    stream: Stream,
    token: vscode.CancellationToken,
  ): Promise<vscode.ChatResult> => {
    const prompt = request.prompt.trim();
    const srv = await server();
    if (!srv) {
      stream.markdown('The ctx-lsp language server is not running. Run **CTX: Restart Server** or see the *ctx-lsp* output.');
      return { errorDetails: { message: 'the ctx-lsp server is not running' } };
    }
    const cmd = request.command ? COMMAND_TOOLS[request.command] : undefined;
    try {
      if (cmd) {
        const input = { [cmd.field]: prompt };
        const bad = checkInput(cmd.tool, input);
        if (bad) {
          stream.markdown(`Usage: \`@ctx /${request.command} <${cmd.field === 'symbol' ? 'symbol, e.g. Repository.save' : 'file or symbol'}>\``);
          return { errorDetails: { message: bad } };
        }
        stream.progress(`Asking the code graph for /${request.command} ${prompt}…`);
        stream.markdown('```text\n' + (await runTool(srv, cmd.tool, input, token)) + '\n```\n');
        return { metadata: { command: request.command } };
      }
      if (!prompt) {
        stream.markdown('Ask a question or paste a task (an issue, a traceback); I answer with the code it needs from this workspace, and why.');
        return {};
      }
      stream.progress('Retrieving context from the code graph…');
      const pack: ContextPack = await srv.getContext({ query: prompt, budget: srv.defaultBudget() }, token);
      const items = pack.items ?? [];
      if (!items.length) {
        stream.markdown(`No context found.${pack.reason ? ' ' + pack.reason : ''}`);
        return { metadata: { items: 0 } };
      }
      const locations = await Promise.all(items.map((it) => itemLocation(it.path, it.uri, it.start_line, it.end_line)));
      const seenFiles = new Set<string>();
      locations.forEach((loc) => {
        if (loc && !seenFiles.has(loc.uri.toString())) {
          seenFiles.add(loc.uri.toString());
          stream.reference(loc);
        }
      });
      stream.markdown(`**${items.length} spans** chosen from ${seenFiles.size} file${seenFiles.size === 1 ? '' : 's'} (${pack.tokens ?? 0} of ${pack.budget ?? '?'} tokens), best first:\n\n`);
      items.forEach((it, i) => {
        stream.markdown(`${i + 1}. `);
        const loc = locations[i];
        if (loc) stream.anchor(loc, spanLabel(it));
        else stream.markdown(`\`${spanLabel(it)}\``);
        const why = (it.reasons ?? []).slice(0, 3).map(reasonLabel).join('; ');
        stream.markdown(`${it.symbol ? ` \`${it.symbol}\`` : ''}${why ? ` — ${why}` : ''}\n`);
      });
      stream.markdown('\n---\n\n' + packToMarkdown(pack));
      return { metadata: { items: items.length } };
    } catch (e) {
      if (token.isCancellationRequested) return { metadata: { cancelled: true } };
      const msg = e instanceof Error ? e.message : String(e);
      stream.markdown(`ctx-lsp failed: ${msg}`);
      return { errorDetails: { message: msg } };
    }
  };
}

/** Registers @ctx when this VS Code has the chat API (feature-detected). */
export function registerParticipant(handler: ReturnType<typeof makeChatHandler>, log: (m: string) => void): vscode.Disposable[] {
  const chat = vscode.chat as Partial<typeof vscode.chat> | undefined;
  if (typeof chat?.createChatParticipant !== 'function') {
    log('This VS Code has no vscode.chat.createChatParticipant: @ctx is not registered.');
    return [];
  }
  const p = chat.createChatParticipant(PARTICIPANT_ID, handler as vscode.ChatRequestHandler);
  p.iconPath = new vscode.ThemeIcon('type-hierarchy');
  return [p];
}

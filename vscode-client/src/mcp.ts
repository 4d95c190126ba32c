// Publishes `ctx-lsp mcp` for the workspace through VS Code's MCP server definition provider API
// (contribution `mcpServerDefinitionProviders`), run by the language server's interpreter, so agent
// mode sees the same tools whether it prefers extension tools or MCP.
import * as vscode from 'vscode';
import { Interpreter } from './interpreter';

export const MCP_PROVIDER_ID = 'ctxLsp.mcp';

export interface McpServerSpec {
  label: string;
  command: string;
  args: string[];
  cwd?: string;
}

/** One stdio definition per workspace folder: `<python> -m ctx_lsp mcp --root <folder>`. */
export function mcpSpecs(py: Interpreter | undefined, folders: readonly { name: string; uri: vscode.Uri }[], opts: { cacheDir?: string; include?: string[]; exclude?: string[] }): McpServerSpec[] {
  if (!py) return [];
  const extra = [
    ...(opts.cacheDir ? ['--cache-dir', opts.cacheDir] : []),
    ...(opts.include ?? []).flatMap((g) => ['--include', g]),
    ...(opts.exclude ?? []).flatMap((g) => ['--exclude', g]),
  ];
  return folders
    .filter((f) => f.uri.scheme === 'file')
    .map((f) => ({
      label: folders.length > 1 ? `ctx-lsp (${f.name})` : 'ctx-lsp',
      command: py.command,
      args: [...py.args, '-m', 'ctx_lsp', 'mcp', '--root', f.uri.fsPath, ...extra],
      cwd: f.uri.fsPath,
    }));
}

export function registerMcpProvider(specs: () => McpServerSpec[], changed: vscode.Event<void>, version: string, log: (m: string) => void): vscode.Disposable[] {
  const lm = vscode.lm as Partial<typeof vscode.lm> | undefined;
  if (typeof lm?.registerMcpServerDefinitionProvider !== 'function' || typeof vscode.McpStdioServerDefinition !== 'function') {
    log('This VS Code has no vscode.lm.registerMcpServerDefinitionProvider: ctx-lsp mcp is not published.');
    return [];
  }
  return [
    lm.registerMcpServerDefinitionProvider(MCP_PROVIDER_ID, {
      onDidChangeMcpServerDefinitions: changed,
      provideMcpServerDefinitions: () =>
        specs().map((s) => {
          const d = new vscode.McpStdioServerDefinition(s.label, s.command, s.args, { PYTHONUNBUFFERED: '1' }, version);
          if (s.cwd) d.cwd = vscode.Uri.file(s.cwd);
          return d;
        }),
    }),
  ];
}

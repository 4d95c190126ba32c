// Which Python runs the server, and whether ctx_lsp is importable there.
import * as vscode from 'vscode';
import { execFile } from 'node:child_process';
import * as os from 'node:os';
import { expandPath } from './config';

export interface Interpreter {
  /** Executable path or command name. */
  command: string;
  /** Extra arguments before `-m ctx_lsp serve` (e.g. from `conda run ...` execution details). */
  args: string[];
  source: 'setting' | 'python-extension' | 'default';
}

// The subset of the ms-python.python API we use (see @vscode/python-extension).
interface PythonApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { id: string; path: string } | undefined;
    resolveEnvironment?(env: { id: string; path: string } | string): Promise<{ executable?: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
  };
  settings?: {
    getExecutionDetails?(resource?: vscode.Uri): { execCommand: string[] | undefined };
    onDidChangeExecutionDetails?: vscode.Event<unknown>;
  };
}

export async function pythonExtensionApi(): Promise<PythonApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonApi>('ms-python.python');
  if (!ext) return undefined;
  try {
    return ext.isActive ? ext.exports : await ext.activate();
  } catch {
    return undefined;
  }
}

function firstFolder(): vscode.WorkspaceFolder | undefined {
  return vscode.workspace.workspaceFolders?.[0];
}

export async function resolveInterpreter(log: (msg: string) => void): Promise<Interpreter> {
  const folder = firstFolder();
  const configured = vscode.workspace.getConfiguration('ctxLsp', folder?.uri).get<string>('interpreter', '');
  if (configured && configured.trim()) {
    return {
      command: expandPath(configured, { home: os.homedir(), workspaceFolder: folder?.uri.fsPath, env: process.env }),
      args: [],
      source: 'setting',
    };
  }
  const api = await pythonExtensionApi();
  if (api) {
    try {
      const envPath = api.environments?.getActiveEnvironmentPath(folder?.uri);
      if (envPath) {
        let exe: string | undefined;
        if (api.environments?.resolveEnvironment) {
          const env = await api.environments.resolveEnvironment(envPath);
          exe = env?.executable?.uri?.fsPath;
        }
        exe = exe || envPath.path;
        if (exe) return { command: exe, args: [], source: 'python-extension' };
      }
    } catch (e) {
      log(`Python extension: environments API failed: ${e}`);
    }
    try {
      const cmd = api.settings?.getExecutionDetails?.(folder?.uri).execCommand;
      if (cmd && cmd.length) return { command: cmd[0], args: cmd.slice(1), source: 'python-extension' };
    } catch (e) {
      log(`Python extension: settings API failed: ${e}`);
    }
  }
  return { command: process.platform === 'win32' ? 'python' : 'python3', args: [], source: 'default' };
}

export type CheckResult =
  | { ok: true; version: string }
  | { ok: false; reason: 'not-found' | 'missing-module' | 'error'; detail: string };

/** Runs `<python> -c "import ctx_lsp"`. */
export function checkCtxLsp(py: Interpreter, cwd?: string): Promise<CheckResult> {
  const code = 'import ctx_lsp, sys; print(getattr(ctx_lsp, "__version__", "?"))';
  return new Promise((resolve) => {
    execFile(py.command, [...py.args, '-c', code], { cwd, timeout: 30000, windowsHide: true }, (err, stdout, stderr) => {
      if (!err) return resolve({ ok: true, version: stdout.trim() });
      const e = err as NodeJS.ErrnoException & { killed?: boolean };
      if (e.code === 'ENOENT' || e.code === 'EACCES') {
        return resolve({ ok: false, reason: 'not-found', detail: `${py.command}: ${e.code}` });
      }
      const text = `${stderr}`.trim() || e.message;
      if (/ModuleNotFoundError|No module named/.test(text)) {
        return resolve({ ok: false, reason: 'missing-module', detail: text });
      }
      resolve({ ok: false, reason: 'error', detail: text });
    });
  });
}

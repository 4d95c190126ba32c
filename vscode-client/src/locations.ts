// Opening workspace-relative paths / URIs at 1-based lines.
import * as vscode from 'vscode';

/** A workspace-relative POSIX path (multi-root: relative to the root that holds it) -> Uri. */
export async function resolvePath(path: string, uri?: string | null): Promise<vscode.Uri | undefined> {
  if (uri) {
    try {
      return vscode.Uri.parse(uri, true);
    } catch {
      /* fall through */
    }
  }
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(path)) return vscode.Uri.parse(path);
  if (path.startsWith('/')) return vscode.Uri.file(path);
  const folders = vscode.workspace.workspaceFolders ?? [];
  for (const f of folders) {
    const candidate = vscode.Uri.joinPath(f.uri, ...path.split('/'));
    try {
      await vscode.workspace.fs.stat(candidate);
      return candidate;
    } catch {
      /* not in this root */
    }
  }
  // Maybe the path starts with the root's name (multi-root workspaces).
  for (const f of folders) {
    if (path.startsWith(f.name + '/')) return vscode.Uri.joinPath(f.uri, ...path.slice(f.name.length + 1).split('/'));
  }
  return folders.length ? vscode.Uri.joinPath(folders[0].uri, ...path.split('/')) : undefined;
}

/** The editor column to open code in: the active (or a visible) text editor's column, never the
 * column where `avoid` (the context view) is showing, when another one exists. */
export function editorColumn(avoid?: vscode.ViewColumn): vscode.ViewColumn {
  const active = vscode.window.activeTextEditor?.viewColumn;
  if (active !== undefined && active !== avoid) return active;
  const other = vscode.window.visibleTextEditors.map((e) => e.viewColumn).find((c) => c !== undefined && c !== avoid);
  if (other !== undefined) return other;
  if (avoid === undefined) return active ?? vscode.ViewColumn.One;
  return avoid === vscode.ViewColumn.One ? vscode.ViewColumn.Two : vscode.ViewColumn.One;
}

/** Opens `uri` with lines start..end (1-based, inclusive) selected. */
export async function openSpan(uri: vscode.Uri, start: number, end?: number, opts: { preview?: boolean; preserveFocus?: boolean; viewColumn?: vscode.ViewColumn; character?: number } = {}): Promise<vscode.TextEditor> {
  const doc = await vscode.workspace.openTextDocument(uri);
  const s = Math.max(0, (start || 1) - 1);
  const e = Math.max(s, (end || start || 1) - 1);
  const range = doc.validateRange(new vscode.Range(s, 0, e, Number.MAX_SAFE_INTEGER));
  const editor = await vscode.window.showTextDocument(doc, {
    preview: opts.preview ?? true,
    preserveFocus: opts.preserveFocus ?? false,
    viewColumn: opts.viewColumn ?? editorColumn(),
    selection: new vscode.Selection(range.start, range.start),
  });
  if (end === undefined) {
    // A location (a neighbour, a site): the cursor at the line's first non-blank character.
    const line = doc.lineAt(Math.min(s, doc.lineCount - 1));
    const pos = doc.validatePosition(new vscode.Position(line.lineNumber, opts.character ?? line.firstNonWhitespaceCharacterIndex));
    editor.selection = new vscode.Selection(pos, pos);
  } else {
    // A span: selected, anchor at the end and cursor at the start so the view stays scrolled left.
    editor.selection = new vscode.Selection(range.end, range.start);
  }
  editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  return editor;
}

export async function openPath(path: string | undefined, uri: string | undefined | null, start: number, end?: number, opts?: { preview?: boolean; preserveFocus?: boolean; viewColumn?: vscode.ViewColumn; character?: number }): Promise<void> {
  const target = await resolvePath(path ?? '', uri);
  if (!target) {
    void vscode.window.showWarningMessage(`CTX: cannot locate ${path ?? uri} in the workspace.`);
    return;
  }
  try {
    await openSpan(target, start, end, opts);
  } catch (e) {
    void vscode.window.showWarningMessage(`CTX: cannot open ${path ?? uri}: ${e instanceof Error ? e.message : e}`);
  }
}

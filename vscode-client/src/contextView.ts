// The "CTX Context" webview: one ContextPack at a time.
import * as vscode from 'vscode';
import * as crypto from 'node:crypto';
import { ContextPack, packToHtml, packToMarkdown } from './contextPack';
import { editorColumn, openPath } from './locations';

export class ContextPanel implements vscode.Disposable {
  static readonly viewType = 'ctxLsp.context';
  private panel: vscode.WebviewPanel | undefined;
  private pack: ContextPack | undefined;
  private seq = 0;
  private readonly disposables: vscode.Disposable[] = [];

  /** Shows `pack`, beside the active editor (never on top of it). */
  show(pack: ContextPack, title?: string, opts: { preserveFocus?: boolean } = {}): void {
    this.pack = pack;
    const activeCol = vscode.window.activeTextEditor?.viewColumn;
    const preserveFocus = !!opts.preserveFocus;
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(
        ContextPanel.viewType,
        'CTX Context',
        { viewColumn: activeCol !== undefined ? vscode.ViewColumn.Beside : vscode.ViewColumn.Active, preserveFocus },
        { enableScripts: true, enableFindWidget: true, localResourceRoots: [] },
      );
      this.panel.onDidDispose(() => (this.panel = undefined), null, this.disposables);
      this.panel.webview.onDidReceiveMessage((m) => this.onMessage(m), null, this.disposables);
    } else {
      const col = this.panel.viewColumn;
      this.panel.reveal(activeCol !== undefined && col === activeCol ? vscode.ViewColumn.Beside : col, preserveFocus);
    }
    this.panel.title = `CTX: ${title ?? pack.query ?? 'Context'}`;
    const nonce = crypto.randomBytes(16).toString('base64');
    this.panel.webview.html = packToHtml(pack, { nonce, cspSource: this.panel.webview.cspSource, title: title ?? pack.query ?? undefined, seq: ++this.seq });
  }

  get current(): ContextPack | undefined {
    return this.pack;
  }

  async copyMarkdown(): Promise<void> {
    if (!this.pack) return;
    await vscode.env.clipboard.writeText(packToMarkdown(this.pack));
    void vscode.window.showInformationMessage('CTX: context copied as Markdown.');
  }

  /** The editor column for files opened from the view: not the view's own column. */
  editorColumn(): vscode.ViewColumn {
    return editorColumn(this.panel?.visible ? this.panel.viewColumn : undefined);
  }

  async openAll(): Promise<void> {
    const items = this.pack?.items ?? [];
    const max = 25;
    for (const item of items.slice(0, max)) {
      await openPath(item.path, item.uri, item.start_line, item.end_line, { preview: false, preserveFocus: true, viewColumn: this.editorColumn() });
    }
    if (items.length > max) void vscode.window.showInformationMessage(`CTX: opened the first ${max} of ${items.length} items.`);
  }

  private async onMessage(m: { type?: string; index?: number }): Promise<void> {
    switch (m?.type) {
      case 'open': {
        const item = this.pack?.items?.[m.index ?? -1];
        if (item) await openPath(item.path, item.uri, item.start_line, item.end_line, { preview: true, viewColumn: this.editorColumn() });
        break;
      }
      case 'openAll':
        await this.openAll();
        break;
      case 'copyMarkdown':
        await this.copyMarkdown();
        break;
    }
  }

  dispose(): void {
    this.panel?.dispose();
    for (const d of this.disposables) d.dispose();
  }
}

// The "CTX Context" webview: one ContextPack at a time.
import * as vscode from 'vscode';
import * as crypto from 'node:crypto';
import { ContextPack, packToHtml, packToMarkdown } from './contextPack';
import { openPath } from './locations';

export class ContextPanel implements vscode.Disposable {
  static readonly viewType = 'ctxLsp.context';
  private panel: vscode.WebviewPanel | undefined;
  private pack: ContextPack | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  show(pack: ContextPack, title?: string): void {
    this.pack = pack;
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(
        ContextPanel.viewType,
        'CTX Context',
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false },
        { enableScripts: true, enableFindWidget: true, localResourceRoots: [] },
      );
      this.panel.onDidDispose(() => (this.panel = undefined), null, this.disposables);
      this.panel.webview.onDidReceiveMessage((m) => this.onMessage(m), null, this.disposables);
    } else {
      this.panel.reveal(this.panel.viewColumn ?? vscode.ViewColumn.Beside, false);
    }
    this.panel.title = `CTX: ${title ?? pack.query ?? 'Context'}`;
    const nonce = crypto.randomBytes(16).toString('base64');
    this.panel.webview.html = packToHtml(pack, { nonce, cspSource: this.panel.webview.cspSource, title: title ?? pack.query ?? undefined });
  }

  get current(): ContextPack | undefined {
    return this.pack;
  }

  async copyMarkdown(): Promise<void> {
    if (!this.pack) return;
    await vscode.env.clipboard.writeText(packToMarkdown(this.pack));
    void vscode.window.showInformationMessage('CTX: context copied as Markdown.');
  }

  async openAll(): Promise<void> {
    const items = this.pack?.items ?? [];
    const max = 25;
    for (const item of items.slice(0, max)) {
      await openPath(item.path, item.uri, item.start_line, item.end_line, { preview: false, preserveFocus: true });
    }
    if (items.length > max) void vscode.window.showInformationMessage(`CTX: opened the first ${max} of ${items.length} items.`);
  }

  private async onMessage(m: { type?: string; index?: number }): Promise<void> {
    switch (m?.type) {
      case 'open': {
        const item = this.pack?.items?.[m.index ?? -1];
        if (item) await openPath(item.path, item.uri, item.start_line, item.end_line, { preview: true });
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

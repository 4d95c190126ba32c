// The "CTX Graph" webview: a file's or symbol's typed neighbourhood drawn with cytoscape
// (dist/graph.js, bundled; no network). Click a node to open it.
import * as vscode from 'vscode';
import * as crypto from 'node:crypto';
import { graphHtml } from './graphModel';
import { editorColumn, openPath } from './locations';
import { Neighbourhood } from './toolText';

export class GraphPanel implements vscode.Disposable {
  static readonly viewType = 'ctxLsp.graph';
  private panel: vscode.WebviewPanel | undefined;
  private graph: Neighbourhood | undefined;
  private seq = 0;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly extensionUri: vscode.Uri) {}

  get current(): Neighbourhood | undefined {
    return this.graph;
  }

  show(graph: Neighbourhood): void {
    this.graph = graph;
    const dist = vscode.Uri.joinPath(this.extensionUri, 'dist');
    if (!this.panel) {
      this.panel = vscode.window.createWebviewPanel(GraphPanel.viewType, 'CTX Graph', { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, { enableScripts: true, localResourceRoots: [dist] });
      this.panel.onDidDispose(() => (this.panel = undefined), null, this.disposables);
      this.panel.webview.onDidReceiveMessage((m) => this.onMessage(m), null, this.disposables);
    } else {
      this.panel.reveal(this.panel.viewColumn, true);
    }
    const c = graph.center;
    this.panel.title = `CTX Graph: ${c ? (c.kind === 'file' ? (c.path ?? c.label).split('/').pop() : c.label) : '—'}`;
    const webview = this.panel.webview;
    webview.html = graphHtml(graph, {
      nonce: crypto.randomBytes(16).toString('base64'),
      cspSource: webview.cspSource,
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(dist, 'graph.js')).toString(),
      seq: ++this.seq,
    });
  }

  private async onMessage(m: { type?: string; id?: string }): Promise<void> {
    if (m?.type !== 'open') return;
    const n = this.graph?.nodes.find((x) => x.id === m.id);
    if (!n || !n.path) return;
    await openPath(n.path, n.uri, n.line ?? 1, undefined, { viewColumn: editorColumn(this.panel?.viewColumn) });
  }

  dispose(): void {
    this.panel?.dispose();
    for (const d of this.disposables) d.dispose();
  }
}

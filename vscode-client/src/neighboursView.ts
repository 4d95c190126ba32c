// The "CTX Neighbours" tree view (explorer).
import * as vscode from 'vscode';
import { ArchitecturalContext, buildNeighbourTree, neighbourCount, TreeNode } from './neighbours';

export class NeighboursProvider implements vscode.TreeDataProvider<TreeNode> {
  private readonly emitter = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;
  private roots: TreeNode[] = [];
  result: ArchitecturalContext | undefined;
  fileUri: vscode.Uri | undefined;

  set(result: ArchitecturalContext, fileUri: vscode.Uri): void {
    this.result = result;
    this.fileUri = fileUri;
    this.roots = buildNeighbourTree(result);
    this.emitter.fire(undefined);
  }

  clear(): void {
    this.result = undefined;
    this.roots = [];
    this.emitter.fire(undefined);
  }

  get count(): number {
    return this.result ? neighbourCount(this.result) : 0;
  }

  getChildren(node?: TreeNode): TreeNode[] {
    return node ? node.children : this.roots;
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const state =
      node.children.length === 0
        ? vscode.TreeItemCollapsibleState.None
        : node.kind === 'group'
          ? vscode.TreeItemCollapsibleState.Expanded
          : vscode.TreeItemCollapsibleState.Collapsed;
    const item = new vscode.TreeItem(node.label, state);
    item.id = node.id;
    item.description = node.description;
    item.tooltip = node.tooltip;
    item.contextValue = node.kind;
    if (node.kind === 'group') item.iconPath = new vscode.ThemeIcon(node.label.endsWith('←') ? 'arrow-left' : 'arrow-right');
    else if (node.kind === 'site') item.iconPath = new vscode.ThemeIcon('location');
    if (node.target) {
      item.command = { command: 'ctxLsp.openLocation', title: 'Open', arguments: [node.target] };
      if (node.kind === 'neighbour' && node.target.uri) {
        try {
          item.resourceUri = vscode.Uri.parse(node.target.uri);
        } catch {
          /* ignore */
        }
        item.iconPath = vscode.ThemeIcon.File;
        if (node.label !== node.target.path) item.iconPath = new vscode.ThemeIcon('symbol-' + symbolIcon(node.tooltip ?? ''));
      }
    }
    return item;
  }
}

function symbolIcon(tooltip: string): string {
  const m = /\((\w+)\)/.exec(tooltip);
  switch (m?.[1]) {
    case 'class':
      return 'class';
    case 'method':
      return 'method';
    case 'function':
      return 'function';
    case 'file':
    case 'module':
      return 'file';
    case 'test':
      return 'event';
    default:
      return 'namespace';
  }
}

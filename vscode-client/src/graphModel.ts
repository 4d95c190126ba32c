// Pure model of the "CTX Graph" webview (no `vscode` import): a `ctx.neighbourhood` result as
// cytoscape elements, and the webview's HTML (CSP-strict: one nonce'd script from the extension).
import { escapeHtml } from './contextPack';
import { GraphNode, Neighbourhood } from './toolText';

export const NODE_COLOURS: Record<string, string> = {
  file: '#6c8ebf',
  class: '#d79b00',
  function: '#82b366',
  method: '#4fa3a5',
  test: '#b85450',
  variable: '#9673a6',
  commit: '#888888',
};

export const EDGE_COLOURS: Record<string, string> = {
  IMPORTS: '#6c8ebf',
  CALLS: '#82b366',
  INSTANTIATES: '#d6b656',
  REFERENCES: '#a0a0a0',
  INHERITS: '#d79b00',
  OVERRIDES: '#e07b39',
  COVERS: '#b85450',
  CONTAINS: '#c0c0c0',
  TOUCHED: '#888888',
};

export interface CyElement {
  group: 'nodes' | 'edges';
  data: Record<string, unknown>;
  classes?: string;
}

export function nodeColour(kind: string): string {
  return NODE_COLOURS[kind] ?? '#999999';
}

export function edgeColour(kind: string): string {
  return EDGE_COLOURS[kind] ?? '#999999';
}

/** A short node label: a file's base name, a symbol's qualified name. */
export function shortLabel(n: GraphNode, all: GraphNode[] = []): string {
  if (n.kind !== 'file') return n.label;
  const path = n.path ?? n.label;
  const base = path.split('/').pop() ?? n.label;
  // same-named modules (app.py, __init__.py, utils.py) are told apart by their folder
  const twin = all.some((o) => o !== n && o.kind === 'file' && (o.path ?? o.label).split('/').pop() === base);
  return twin ? path.split('/').slice(-2).join('/') : base;
}

export function toElements(g: Neighbourhood): CyElement[] {
  const out: CyElement[] = [];
  const ids = new Set(g.nodes.map((n) => n.id));
  for (const n of g.nodes) {
    out.push({
      group: 'nodes',
      data: { id: n.id, label: shortLabel(n, g.nodes), kind: n.kind, colour: nodeColour(n.kind), path: n.path ?? null, line: n.line ?? null, uri: n.uri ?? null, center: n.id === g.center?.id },
      classes: n.id === g.center?.id ? 'center' : n.kind,
    });
  }
  g.edges.forEach((e, i) => {
    if (!ids.has(e.source) || !ids.has(e.target)) return;
    out.push({
      group: 'edges',
      data: { id: `e${i}`, source: e.source, target: e.target, kind: e.kind, label: (e.count ?? 1) > 1 ? `${e.kind} ×${e.count}` : e.kind, colour: edgeColour(e.kind), sitePath: e.site?.path ?? null, siteLine: e.site?.line ?? null },
    });
  });
  return out;
}

export interface GraphHtmlOptions {
  nonce: string;
  cspSource: string;
  scriptUri: string;
  seq?: number;
}

/** The webview document (cytoscape's own stylesheet is included: it would inject it unnonced,
 * which the CSP blocks). The data travels as JSON in a non-executed script element; the node
 * list beside the canvas names every node (clickable, and readable by tests and screen readers). */
export function graphHtml(g: Neighbourhood, opt: GraphHtmlOptions): string {
  const e = escapeHtml;
  const elements = toElements(g);
  // `<` escaped so the JSON cannot close the script element
  const json = JSON.stringify({ elements, center: g.center?.id ?? null }).replace(/</g, '\\u003c');
  const kinds = [...new Set(g.nodes.map((n) => n.kind))].sort();
  const edgeKinds = [...new Set(g.edges.map((x) => x.kind))].sort();
  const legend = [
    ...kinds.map((k) => `<span class="key"><span class="dot" data-colour="${e(nodeColour(k))}"></span>${e(k)}</span>`),
    ...edgeKinds.map((k) => `<span class="key"><span class="line" data-colour="${e(edgeColour(k))}"></span>${e(k)}</span>`),
  ].join(' ');
  const title = g.center ? (g.center.kind === 'file' ? g.center.path ?? g.center.label : `${g.center.symbol} (${g.center.kind})`) : 'no graph';
  const list = g.nodes
    .map((n, i) => `<li><a href="#" class="node-link" title="${e(n.path ? `${n.path}${n.kind !== 'file' ? `:${n.line ?? ''}` : ''}` : n.label)}" data-id="${e(n.id)}" data-index="${i}"><span class="dot" data-colour="${e(nodeColour(n.kind))}"></span>${e(shortLabel(n, g.nodes))}</a> <span class="dim">${e(n.kind)}${n.path ? ` · ${e(n.path)}${n.kind !== 'file' ? `:${n.line ?? ''}` : ''}` : ''}</span></li>`)
    .join('\n');
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src ${opt.cspSource} data:; style-src ${opt.cspSource} 'nonce-${opt.nonce}'; script-src 'nonce-${opt.nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>CTX Graph</title>
<style nonce="${opt.nonce}">
html, body { height: 100%; margin: 0; }
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); display: flex; flex-direction: column; }
header { padding: 6px 12px; border-bottom: 1px solid var(--vscode-editorWidget-border, #8884); }
h1 { font-size: 1.15em; margin: 2px 0; }
.dim { color: var(--vscode-descriptionForeground); }
main { flex: 1; display: flex; min-height: 0; }
#cy { flex: 1; min-width: 0; }
aside { width: 260px; overflow: auto; border-left: 1px solid var(--vscode-editorWidget-border, #8884); padding: 4px 8px; }
aside ul { list-style: none; margin: 0; padding: 0; }
aside li { margin: 3px 0; }
a { color: var(--vscode-textLink-foreground); text-decoration: none; }
a:hover { text-decoration: underline; }
.key { margin-right: 10px; white-space: nowrap; }
.dot { display: inline-block; width: 9px; height: 9px; border-radius: 50%; margin-right: 4px; }
.line { display: inline-block; width: 16px; height: 3px; margin: 0 4px 2px 0; vertical-align: middle; }
@media (max-width: 760px) {
  main { flex-direction: column; }
  #cy { min-height: 320px; }
  aside { width: auto; max-height: 35%; border-left: none; border-top: 1px solid var(--vscode-editorWidget-border, #8884); }
}
</style>
<style nonce="${opt.nonce}" id="__________cytoscape_stylesheet">.__________cytoscape_container { position: relative; }</style>
</head>
<body data-seq="${opt.seq ?? 0}" data-center="${e(g.center?.id ?? '')}">
<header><h1>Graph: ${e(title)}</h1>
<div class="dim">${g.nodes.length ? `${g.nodes.length - 1} neighbours · ${g.edges.length} edges${g.truncated ? ` · ${g.truncated} more not drawn` : ''} · click a node to open it` : e(g.reason ?? 'nothing to draw')}</div>
<div id="legend">${legend}</div></header>
<main><div id="cy"></div><aside><div class="dim">nodes</div><ul id="node-list">${list}</ul></aside></main>
<script type="application/json" id="graph-data">${json}</script>
<script nonce="${opt.nonce}" src="${e(opt.scriptUri)}"></script>
</body></html>`;
}

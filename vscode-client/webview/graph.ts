// The "CTX Graph" webview script (bundled with cytoscape by esbuild into dist/graph.js; runs in the
// webview, no network). Reads the elements from #graph-data, draws them, posts {type:'open', id}.
import cytoscape from 'cytoscape';

declare function acquireVsCodeApi(): { postMessage(msg: unknown): void };

interface Data {
  elements: cytoscape.ElementDefinition[];
  center: string | null;
}

const vscode = acquireVsCodeApi();
const data = JSON.parse(document.getElementById('graph-data')?.textContent ?? '{"elements":[],"center":null}') as Data;
const css = getComputedStyle(document.body);
const fg = css.getPropertyValue('--vscode-foreground').trim() || '#cccccc';
const bg = css.getPropertyValue('--vscode-editor-background').trim() || '#1e1e1e';

// Colours of the legend and the node list (set through the CSSOM: the CSP forbids style attributes).
for (const el of document.querySelectorAll<HTMLElement>('[data-colour]')) el.style.background = el.dataset.colour ?? '';

const cy = cytoscape({
  container: document.getElementById('cy'),
  elements: data.elements,
  wheelSensitivity: 0.3,
  style: [
    {
      selector: 'node',
      style: {
        'background-color': 'data(colour)',
        label: 'data(label)',
        color: fg,
        'font-size': 11,
        'text-valign': 'bottom',
        'text-margin-y': 4,
        'text-outline-color': bg,
        'text-outline-width': 2,
        width: 18,
        height: 18,
      },
    },
    { selector: 'node.center', style: { width: 30, height: 30, 'border-width': 3, 'border-color': fg, 'font-weight': 'bold' } },
    { selector: 'node[kind = "file"]', style: { shape: 'round-rectangle' } },
    { selector: 'node[kind = "class"]', style: { shape: 'diamond' } },
    { selector: 'node[kind = "test"]', style: { shape: 'triangle' } },
    {
      selector: 'edge',
      style: {
        width: 2,
        'line-color': 'data(colour)',
        'target-arrow-color': 'data(colour)',
        'target-arrow-shape': 'triangle',
        'curve-style': 'bezier',
        label: 'data(kind)',
        'font-size': 9,
        color: fg,
        'text-rotation': 'autorotate',
        'text-outline-color': bg,
        'text-outline-width': 2,
      },
    },
  ],
  layout: {
    name: 'concentric',
    concentric: (n: cytoscape.NodeSingular) => (n.data('center') ? 2 : 1),
    levelWidth: () => 1,
    minNodeSpacing: 40,
    padding: 30,
    fit: true,
    animate: false,
  },
});

const open = (id: string) => vscode.postMessage({ type: 'open', id });
cy.on('tap', 'node', (ev) => open(ev.target.id()));
for (const a of document.querySelectorAll<HTMLAnchorElement>('.node-link')) {
  a.addEventListener('click', (ev) => {
    ev.preventDefault();
    open(a.dataset.id ?? '');
  });
  a.addEventListener('mouseenter', () => cy.getElementById(a.dataset.id ?? '').select());
  a.addEventListener('mouseleave', () => cy.elements().unselect());
}
window.addEventListener('resize', () => {
  cy.resize();
  cy.fit(undefined, 30);
});
// for tests and screen readers: how many nodes and edges were drawn
document.body.dataset.nodes = String(cy.nodes().length);
document.body.dataset.edges = String(cy.edges().length);
document.body.dataset.rendered = 'true';

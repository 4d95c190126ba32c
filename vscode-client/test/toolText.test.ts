import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { checkInput, Neighbourhood, neighbourhoodText, relationsText, titleOf } from '../src/toolText';
import { graphHtml, toElements } from '../src/graphModel';

const graph: Neighbourhood = {
  center: { id: 'shop/service.py', label: 'service.py', kind: 'file', path: 'shop/service.py', symbol: null, line: 1, uri: 'file:///ws/shop/service.py' },
  candidates: [],
  nodes: [
    { id: 'shop/service.py', label: 'service.py', kind: 'file', path: 'shop/service.py', symbol: null, line: 1, uri: 'file:///ws/shop/service.py' },
    { id: 'shop/models.py', label: 'models.py', kind: 'file', path: 'shop/models.py', symbol: null, line: 1, uri: 'file:///ws/shop/models.py' },
    { id: 'tests/t.py::test_x', label: 'test_x', kind: 'test', path: 'tests/t.py', symbol: 'test_x', line: 4, uri: 'file:///ws/tests/t.py' },
  ],
  edges: [
    { source: 'shop/service.py', target: 'shop/models.py', kind: 'IMPORTS', count: 1, site: { path: 'shop/service.py', line: 3 }, via: null },
    { source: 'tests/t.py::test_x', target: 'shop/service.py', kind: 'CALLS', count: 2, site: { path: 'tests/t.py', line: 5 }, via: 'OrderService.place_order' },
    { source: 'gone', target: 'shop/service.py', kind: 'CALLS', count: 1, site: null, via: null },
  ],
  truncated: 0,
  reason: null,
};

test('checkInput names the bad field and accepts good input', () => {
  assert.equal(checkInput('ctx_getContext', { query: 'who calls save' }), undefined);
  assert.equal(checkInput('ctx_getContext', { query: 'q', budget: 500 }), undefined);
  assert.match(checkInput('ctx_getContext', {}) ?? '', /'query'/);
  assert.match(checkInput('ctx_getContext', { query: '  ' }) ?? '', /must not be empty/);
  assert.match(checkInput('ctx_getContext', { query: 'q', budget: 1.5 }) ?? '', /'budget'/);
  assert.match(checkInput('ctx_findCallers', { symbol: 3 }) ?? '', /'symbol'.*got 3/);
  assert.match(checkInput('ctx_neighbours', null) ?? '', /object input/);
  assert.equal(checkInput('ctx_neighbours', { target: 'shop/service.py' }), undefined);
});

test('relationsText lists call sites and says why nothing was found', () => {
  const t = relationsText('save', {
    symbol: 'shop/models.py::Repository.save', relation: 'callers', candidates: ['shop/x.py::Other.save'],
    locations: [{ path: 'shop/service.py', line: 12, symbol: 'OrderService.place_order', kind: 'method', reason: 'calls save' }],
  });
  assert.match(t, /^1 callers of shop\/models\.py::Repository\.save \(path:line is the call site\):/);
  assert.match(t, /- shop\/service\.py:12 OrderService\.place_order \(calls save\)/);
  assert.match(t, /also matches shop\/x\.py::Other\.save/);
  const twice = relationsText('save', {
    symbol: 'shop/models.py::Repository.save', relation: 'callers',
    locations: [{ path: 'shop/service.py', line: 12, symbol: 'OrderService.place_order', kind: 'method', reason: 'calls save' },
                { path: 'shop/service.py', line: 15, symbol: 'OrderService.place_order', kind: 'method', reason: 'calls save' }],
  });
  assert.match(twice, /^1 callers of shop\/models\.py::Repository\.save, 2 call sites \(path:line is the call site\):/);
  assert.match(relationsText('nope', { symbol: null, relation: 'callers', locations: [], reason: 'unknown symbol: nope' }), /^No symbol found: unknown symbol: nope/);
  assert.match(relationsText('f', { symbol: 'a.py::f', relation: 'tests', locations: [] }), /^No tests found for a\.py::f/);
});

test('neighbourhoodText groups by edge kind and direction', () => {
  const t = neighbourhoodText('shop/service.py', graph);
  assert.match(t, /^shop\/service\.py: typed 1-hop neighbourhood, 2 neighbours, 3 edges/);
  assert.match(t, /IMPORTS ->\n {2}- shop\/models\.py \(site shop\/service\.py:3\)/);
  assert.match(t, /CALLS <-\n {2}- tests\/t\.py:4 test_x \(test\) \[OrderService\.place_order\] \(site tests\/t\.py:5, 2 edges\)/);
  assert.match(neighbourhoodText('x', { center: null, nodes: [], edges: [], reason: 'file not in the index: x' }), /Nothing found for "x": file not in the index: x/);
});

test('titleOf keeps the first line of a task', () => {
  assert.equal(titleOf('who calls save'), 'who calls save');
  assert.equal(titleOf('\nOrders are lost\n\nWhen I place an order...'), 'Orders are lost …');
  assert.equal(titleOf('x'.repeat(80)).length, 60);
});

test('toElements drops edges to nodes that are not drawn and marks the center', () => {
  const els = toElements(graph);
  const nodes = els.filter((e) => e.group === 'nodes');
  const edges = els.filter((e) => e.group === 'edges');
  assert.equal(nodes.length, 3);
  assert.equal(edges.length, 2);
  assert.equal(nodes[0].classes, 'center');
  assert.equal(edges[1].data.label, 'CALLS ×2');
  assert.notEqual(nodes[1].data.colour, nodes[2].data.colour);
});

test('graphHtml is CSP-strict and lists every node', () => {
  const html = graphHtml({ ...graph, nodes: [...graph.nodes, { id: 'a.py::x</script>', label: '</script><b>', kind: 'function', path: 'a.py', line: 1 }] }, { nonce: 'N0NCE', cspSource: 'vscode-resource:', scriptUri: 'vscode-resource:/dist/graph.js' });
  assert.match(html, /default-src 'none'/);
  assert.match(html, /script-src 'nonce-N0NCE'/);
  assert.doesNotMatch(html, /unsafe-inline|unsafe-eval|https?:\/\//);
  assert.match(html, /<script nonce="N0NCE" src="vscode-resource:\/dist\/graph\.js"><\/script>/);
  assert.equal((html.match(/class="node-link"/g) ?? []).length, 4);
  // no markup injection from names: the JSON cannot end its script element, labels are escaped
  assert.equal((html.match(/<\/script>/g) ?? []).length, 2);
  assert.match(html, /&lt;\/script&gt;&lt;b&gt;/);
  assert.doesNotMatch(html, / style="/);
});

test('graph labels tell same-named files apart by their folder, and links say where they go', () => {
  const twins = {
    center: { id: 'src/flask/app.py', label: 'src/flask/app.py', kind: 'file', path: 'src/flask/app.py' },
    nodes: [
      { id: 'src/flask/app.py', label: 'src/flask/app.py', kind: 'file', path: 'src/flask/app.py' },
      { id: 'src/flask/sansio/app.py', label: 'src/flask/sansio/app.py', kind: 'file', path: 'src/flask/sansio/app.py' },
      { id: 'src/flask/cli.py', label: 'src/flask/cli.py', kind: 'file', path: 'src/flask/cli.py' },
    ],
    edges: [],
  };
  const labels = toElements(twins as never).filter((x) => x.group === 'nodes').map((x) => x.data.label);
  assert.deepEqual(labels, ['flask/app.py', 'sansio/app.py', 'cli.py']);
  const html = graphHtml(twins as never, { nonce: 'N', cspSource: 'c:', scriptUri: 'c:/g.js' });
  assert.match(html, /title="src\/flask\/sansio\/app.py"[^>]*>.*sansio\/app.py<\/a> <span class="dim">file · src\/flask\/sansio\/app.py<\/span>/);
  assert.doesNotMatch(html, /title="#"/);
});

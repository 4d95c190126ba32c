import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { ArchitecturalContext, buildNeighbourTree, groupLabel, neighbourCount } from '../src/neighbours';

const result: ArchitecturalContext = {
  uri: 'file:///ws/shop/service.py',
  path: 'shop/service.py',
  groups: [
    {
      edge: 'CALLS', direction: 'in',
      neighbors: [{
        path: 'tests/test_service.py', uri: 'file:///ws/tests/test_service.py', symbol: 'test_place_order', kind: 'function', line: 5,
        site: { path: 'tests/test_service.py', line: 7, uri: 'file:///ws/tests/test_service.py' }, resolver: 'jedi', from_symbol: 'test_place_order',
      }],
    },
    {
      edge: 'IMPORTS', direction: 'out',
      neighbors: [{
        path: 'shop/models.py', uri: 'file:///ws/shop/models.py', symbol: null, kind: 'file', line: 1,
        site: { path: 'shop/service.py', line: 3, col: 0, uri: 'file:///ws/shop/service.py' }, resolver: 'ast-import', from_symbol: null,
        names: ['Order', 'Repository'],
      }],
    },
    { edge: 'INHERITS', direction: 'out', neighbors: [] },
    {
      edge: 'CALLS', direction: 'out',
      neighbors: [
        { path: 'shop/models.py', uri: 'file:///ws/shop/models.py', symbol: 'Repository.save', kind: 'method', line: 9, site: { path: 'shop/service.py', line: 12 }, resolver: 'ast-attr' },
        { path: 'shop/models.py', uri: 'file:///ws/shop/models.py', symbol: 'Repository.get', kind: 'method', line: 14, site: { path: 'shop/service.py', line: 16 }, resolver: 'ast-attr', from_symbol: 'OrderService.find' },
        { path: 'shop/models.py', uri: null, symbol: 'Repository', kind: 'class', line: 4, site: null, resolver: null },
      ],
    },
  ],
};

test('groupLabel shows the edge kind with its direction', () => {
  assert.equal(groupLabel({ edge: 'IMPORTS', direction: 'out' }), 'IMPORTS →');
  assert.equal(groupLabel({ edge: 'CALLS', direction: 'in' }), 'CALLS ←');
});

test('buildNeighbourTree: groups (outgoing first, empty ones dropped) with counts', () => {
  const tree = buildNeighbourTree(result);
  assert.deepEqual(tree.map((g) => g.label), ['CALLS →', 'IMPORTS →', 'CALLS ←']);
  assert.deepEqual(tree.map((g) => g.description), ['3', '1', '1']);
  assert.ok(tree.every((g) => g.kind === 'group' && !g.target));
  assert.equal(tree[1].tooltip, 'What shop/service.py imports');
  assert.equal(tree[2].tooltip, 'Code that calls shop/service.py');
  assert.equal(new Set(tree.flatMap((g) => [g.id, ...g.children.map((c) => c.id)])).size, 3 + 5);
});

test('buildNeighbourTree: neighbours open their location, sites are children', () => {
  const tree = buildNeighbourTree(result);
  const save = tree[0].children[0];
  assert.equal(save.kind, 'neighbour');
  assert.equal(save.label, 'Repository.save');
  assert.equal(save.description, 'shop/models.py:9');
  assert.deepEqual(save.target, { uri: 'file:///ws/shop/models.py', path: 'shop/models.py', line: 9 });
  assert.equal(save.children.length, 1);
  assert.equal(save.children[0].kind, 'site');
  assert.equal(save.children[0].label, 'site: service.py:12');
  assert.deepEqual(save.children[0].target, { path: 'shop/service.py', line: 12 });

  assert.equal(tree[0].children[1].description, 'from OrderService.find · shop/models.py:14');
  const repo = tree[0].children[2];
  assert.equal(repo.children.length, 0, 'no site, no child');
  assert.deepEqual(repo.target, { path: 'shop/models.py', line: 4 });

  const models = tree[1].children[0];
  assert.equal(models.label, 'shop/models.py', 'file neighbours are labelled by path');
  assert.equal(models.children[0].description, 'ast-import');
  assert.deepEqual(models.children[0].target, { uri: 'file:///ws/shop/service.py', path: 'shop/service.py', line: 3, character: 0 });
  assert.equal(models.description, 'Order, Repository');
  assert.match(models.tooltip!, /imports: Order, Repository/);

  const caller = tree[2].children[0];
  assert.equal(caller.description, '→ test_place_order · tests/test_service.py:5');
  assert.equal(caller.children[0].description, 'test_place_order · jedi');
  assert.match(caller.tooltip!, /test_place_order \(function\)\ntests\/test_service\.py:5\nsite: tests\/test_service\.py:7\nresolver: jedi/);
});

test('buildNeighbourTree: commit neighbours (TOUCHED) have no file to open', () => {
  const tree = buildNeighbourTree({
    path: 'a.py',
    groups: [{ edge: 'TOUCHED', direction: 'in', neighbors: [{ path: null, uri: null, symbol: 'fix save', kind: 'commit', commit: '0123456789abcdef', line: null, site: null }] }],
  });
  assert.equal(tree[0].label, 'TOUCHED ←');
  assert.equal(tree[0].children[0].label, '0123456789 fix save');
  assert.equal(tree[0].children[0].target, undefined);
  assert.equal(tree[0].children[0].description, undefined);
});

test('buildNeighbourTree: a commit as the server sends it (an object) is labelled by hash and subject', () => {
  const tree = buildNeighbourTree({
    path: 'a.py',
    groups: [{ edge: 'TOUCHED', direction: 'in', neighbors: [{
      path: '', uri: null, symbol: '23fffad0445a', kind: 'commit', line: null,
      site: { path: 'a.py', line: 1 }, resolver: 'git-blame', names: ['blame=17'],
      commit: { hash: '23fffad0445a7fedb9b5c82c24370a245cd5a386', date: '2026-12-01T13:44:22+00:00',
                author: 'Ann', email: 'ann@example.com', subject: 'Fix save' } }] }],
  });
  const node = tree[0].children[0];
  assert.equal(node.label, '23fffad044 Fix save');
  assert.equal(node.target, undefined);
  assert.match(node.tooltip!, /commit: 23fffad044 2026-12-01 Ann: Fix save/);
});

test('buildNeighbourTree: empty or missing groups', () => {
  assert.deepEqual(buildNeighbourTree({ uri: 'file:///x.py', path: 'x.py', groups: [] }), []);
  assert.deepEqual(buildNeighbourTree({ reason: 'not indexed' }), []);
  assert.equal(neighbourCount(result), 5);
});

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { budgetLabel, ContextPack, escapeHtml, fenceFor, packToHtml, packToMarkdown, reasonLabel, spanLabel, uniqueReasons } from '../src/contextPack';

const pack: ContextPack = {
  query: 'who calls save',
  plan: { trigger: 'EXPLICIT_SYMBOL', operators: ['callers'], mentions: ['save'] },
  budget: 4000,
  tokens: 310,
  stale: false,
  dirty_files: [],
  items: [
    {
      path: 'shop/models.py', start_line: 4, end_line: 9, symbol: 'Repository.save', kind: 'method', detail: 'full',
      score: 3.2, tokens: 120, reasons: [{ via: 'symbol-exact', from: null, weight: 3.0 }],
      text: '    def save(self, order):\n        self.items.append(order)\n',
    },
    {
      path: 'shop/service.py', start_line: 12, end_line: 12, symbol: 'OrderService.place', kind: 'method', detail: 'signature',
      score: 1.25, tokens: 40, reasons: [{ via: 'CALLS<-', from: 'shop/models.py::Repository.save', weight: 0.8 }, { via: 'bm25', weight: 0.333 }],
      text: 'def place(self, order): ...',
    },
  ],
  timings_ms: { total: 3.4 },
};

test('spanLabel uses 1-based inclusive lines', () => {
  assert.equal(spanLabel(pack.items![0]), 'shop/models.py:4-9');
  assert.equal(spanLabel(pack.items![1]), 'shop/service.py:12');
});

test('reasonLabel shows via, from and weight', () => {
  assert.equal(reasonLabel({ via: 'symbol-exact', from: null, weight: 3 }), 'symbol-exact (3.0)');
  assert.equal(reasonLabel({ via: 'CALLS<-', from: 'a.py::f', weight: 0.333 }), 'calls a.py::f (0.33)');
  assert.equal(reasonLabel({ via: 'COVERS->', from: 'a.py::f', weight: 1 }), 'tested by a.py::f (1.0)');
  assert.equal(reasonLabel({ via: 'hop-resolved', from: 'a.py::f', weight: 1 }), 'hop-resolved from a.py::f (1.0)');
  assert.equal(reasonLabel({ via: 'bm25' }), 'bm25');
});

test('budgetLabel: tokens used against the budget', () => {
  assert.equal(budgetLabel(pack), '310 / 4000 tokens (8%)');
  assert.equal(budgetLabel({ items: [{ path: 'a', start_line: 1, end_line: 1, tokens: 7 }] }), '7 tokens');
});

test('packToMarkdown renders header, items, reasons and fenced code', () => {
  const md = packToMarkdown(pack);
  assert.match(md, /^# Context: who calls save\n/);
  assert.match(md, /_2 items · 310 \/ 4000 tokens \(8%\) · plan: EXPLICIT_SYMBOL → callers_/);
  assert.match(md, /## 1\. shop\/models\.py:4-9 — `Repository\.save` \(method, full\)/);
  assert.match(md, /## 2\. shop\/service\.py:12 — `OrderService\.place` \(method, signature\)/);
  assert.match(md, /reasons: calls shop\/models\.py::Repository\.save \(0\.8\); bm25 \(0\.33\)/);
  assert.match(md, /```python\n {4}def save\(self, order\):\n {8}self\.items\.append\(order\)\n```/);
  // Item order is rank order.
  assert.ok(md.indexOf('shop/models.py') < md.indexOf('shop/service.py'));
});

test('packToMarkdown: stale index and empty result with a reason', () => {
  const md = packToMarkdown({ query: 'nothing', budget: 100, tokens: 0, stale: true, dirty_files: ['a.py'], items: [], reason: 'unknown symbol "zz"' });
  assert.match(md, /> ⚠ The index is stale: a\.py/);
  assert.match(md, /> unknown symbol "zz"/);
  assert.match(md, /_0 items · 0 \/ 100 tokens \(0%\)_/);
});

test('fenceFor is longer than any backtick run in the text', () => {
  assert.equal(fenceFor('no ticks'), '```');
  assert.equal(fenceFor('a ```` b'), '`````');
  const md = packToMarkdown({ query: 'q', items: [{ path: 'README.md', start_line: 1, end_line: 3, text: '```py\nx\n```' }] });
  assert.match(md, /````markdown\n```py\nx\n```\n````/);
});

test('packToHtml escapes text, links every item and has the actions', () => {
  const html = packToHtml(
    { ...pack, items: [...pack.items!, { path: 'x<y>.py', start_line: 1, end_line: 2, text: '<script>alert(1)</script>' }] },
    { nonce: 'N0NCE', cspSource: 'vscode-resource:' },
  );
  assert.ok(!html.includes('<script>alert(1)</script>'));
  assert.ok(html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
  assert.ok(html.includes('x&lt;y&gt;.py:1-2'));
  assert.ok(html.includes('data-index="0"') && html.includes('data-index="2"'));
  assert.ok(html.includes('>shop/service.py:12</a>'));
  assert.ok(html.includes('Copy as Markdown') && html.includes('Open All'));
  assert.ok(html.includes("script-src 'nonce-N0NCE'"));
  assert.ok(html.includes('310 / 4000 tokens (8%)'));
  assert.ok(html.includes('calls <code>shop/models.py::Repository.save</code>'));
  // every script/style element carries the nonce
  for (const m of html.matchAll(/<(script|style)([^>]*)>/g)) assert.match(m[2], /nonce="N0NCE"/);
});

test('escapeHtml', () => {
  assert.equal(escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
});

test('a pack\'s notes reach the reader: Markdown and the panel', () => {
  const note = 'no symbol, module or file named frobnicate_widget is indexed; the items are the closest matches by text';
  const withNote: ContextPack = { ...pack, notes: [note] };
  assert.match(packToMarkdown(withNote), new RegExp(`> Note: ${note.replace(/[.;]/g, '\\$&')}`));
  const html = packToHtml(withNote, { nonce: 'n0', cspSource: 'vscode-resource:' });
  assert.ok(html.includes(`<div class="warn">Note: ${escapeHtml(note)}</div>`));
  assert.ok(!packToMarkdown(pack).includes('Note:'));
});

test('uniqueReasons: each reason once, the strongest kept, in first-seen order', () => {
  const got = uniqueReasons([
    { via: 'bm25', weight: 0.5 }, { via: 'CALLS<-', from: 'a.py::f', weight: 1 }, { via: 'bm25', weight: 0.9 },
    { via: 'CALLS<-', from: 'a.py::f', weight: 0.2 }, { via: 'CALLS<-', from: 'b.py::g', weight: 0.3 },
  ]);
  assert.deepEqual(got.map((r) => [r.via, r.from ?? null, r.weight]), [['bm25', null, 0.9], ['CALLS<-', 'a.py::f', 1], ['CALLS<-', 'b.py::g', 0.3]]);
  const md = packToMarkdown({ query: 'q', items: [{ path: 'a.py', start_line: 1, end_line: 2, reasons: [{ via: 'bm25', weight: 1 }, { via: 'bm25', weight: 2 }] }] });
  assert.equal((md.match(/bm25/g) ?? []).length, 1);
});

// Pure helpers for ContextPack results (no `vscode` import: unit-tested with node --test).
// Shape: docs/protocol.md, "ContextPack".

export interface Reason {
  via: string;
  from?: string | null;
  weight?: number | null;
}

export interface ContextItem {
  path: string;
  start_line: number;
  end_line: number;
  symbol?: string | null;
  kind?: string | null;
  detail?: string | null;
  score?: number | null;
  tokens?: number | null;
  reasons?: Reason[] | null;
  text?: string | null;
  uri?: string | null;
}

export interface ContextPack {
  query?: string | null;
  plan?: { trigger?: string | null; operators?: string[] | null; mentions?: string[] | null; task?: boolean | null; evidence?: Record<string, unknown> | null } | null;
  budget?: number | null;
  tokens?: number | null;
  stale?: boolean | null;
  dirty_files?: string[] | null;
  items?: ContextItem[] | null;
  reason?: string | null;
  /** Things the user should know about the answer (a name nothing defines): docs/protocol.md `notes`. */
  notes?: string[] | null;
  timings_ms?: Record<string, number> | null;
}

/** `path:12-30` (or `path:12` for a one-line span). */
export function spanLabel(item: ContextItem): string {
  const start = item.start_line;
  const end = item.end_line;
  if (!start) return item.path;
  return end && end !== start ? `${item.path}:${start}-${end}` : `${item.path}:${start}`;
}

/** An edge a candidate was reached by, as what the item is to the node it was reached from
 * (`CALLS<-` from f: the item calls f), as the CLI's markdown says it (ctx_lsp/retrieval/render.py). */
const RELATION: Record<string, string> = {
  'CALLS<-': 'calls', 'CALLS->': 'called by',
  'REFERENCES<-': 'refers to', 'REFERENCES->': 'referred to by',
  'REFERENCES/import<-': 'imports', 'REFERENCES/import->': 'imported by',
  'IMPORTS<-': 'imports', 'IMPORTS->': 'imported by',
  'INHERITS<-': 'subclass of', 'INHERITS->': 'base class of',
  'INSTANTIATES<-': 'instantiates', 'INSTANTIATES->': 'instantiated by',
  'OVERRIDES<-': 'overrides', 'OVERRIDES->': 'overridden by',
  'COVERS<-': 'tests', 'COVERS->': 'tested by',
  'CONTAINS<-': 'contains', 'CONTAINS->': 'in',
  'TOUCHED<-': 'touched', 'TOUCHED->': 'touched by',
};

/** The words of a reason without its weight: `calls pkg/models.py::Repo.save`, `symbol-exact`. */
export function reasonWords(r: Reason): string {
  const relation = r.from ? RELATION[r.via] : undefined;
  return relation ? `${relation} ${r.from}` : r.from ? `${r.via} from ${r.from}` : r.via;
}

/** Each reason once (the strongest of those that read the same): an item merged with others keeps
 * their reasons too, and several say the same thing (`bm25`, `in fields.py::Pluck`). */
export function uniqueReasons(reasons: Reason[] | null | undefined): Reason[] {
  const best = new Map<string, Reason>();
  for (const r of reasons ?? []) {
    const key = reasonWords(r);
    const held = best.get(key);
    if (!held || (r.weight ?? 0) > (held.weight ?? 0)) best.set(key, r);
  }
  return [...best.values()];
}

/** One reason as text: `calls pkg/models.py::Repo.save (3.0)`. */
export function reasonLabel(r: Reason): string {
  let s = reasonWords(r);
  if (typeof r.weight === 'number') s += ` (${formatNumber(r.weight)})`;
  return s;
}

export function formatNumber(n: number): string {
  return Number.isInteger(n) ? n.toFixed(1) : String(Math.round(n * 100) / 100);
}

const LANGS: Record<string, string> = {
  py: 'python', pyi: 'python', ts: 'typescript', js: 'javascript', md: 'markdown', toml: 'toml',
  json: 'json', yaml: 'yaml', yml: 'yaml', cfg: 'ini', ini: 'ini', sh: 'bash', txt: '',
};

export function languageOf(path: string): string {
  const m = /\.([A-Za-z0-9]+)$/.exec(path);
  return m ? (LANGS[m[1].toLowerCase()] ?? '') : '';
}

/** A code fence longer than any run of backticks inside `text`. */
export function fenceFor(text: string): string {
  let longest = 0;
  for (const m of text.matchAll(/`+/g)) longest = Math.max(longest, m[0].length);
  return '`'.repeat(Math.max(3, longest + 1));
}

export function totalTokens(pack: ContextPack): number {
  if (typeof pack.tokens === 'number') return pack.tokens;
  return (pack.items ?? []).reduce((n, it) => n + (it.tokens ?? 0), 0);
}

/** `1375 / 4000 tokens (34%)`. */
export function budgetLabel(pack: ContextPack): string {
  const used = totalTokens(pack);
  if (!pack.budget) return `${used} tokens`;
  const pct = Math.round((100 * used) / pack.budget);
  return `${used} / ${pack.budget} tokens (${pct}%)`;
}

function itemHeading(item: ContextItem): string {
  const bits: string[] = [];
  if (item.symbol) bits.push(`\`${item.symbol}\``);
  const meta = [item.kind, item.detail].filter(Boolean).join(', ');
  if (meta) bits.push(`(${meta})`);
  return bits.join(' ');
}

/** The whole pack as Markdown, ready to paste into a chat or an issue. */
export function packToMarkdown(pack: ContextPack): string {
  const items = pack.items ?? [];
  const out: string[] = [];
  out.push(`# Context: ${pack.query ?? ''}`.trimEnd());
  out.push('');
  const summary = [`${items.length} item${items.length === 1 ? '' : 's'}`, budgetLabel(pack)];
  if (pack.plan?.trigger) summary.push(`plan: ${pack.plan.trigger}${pack.plan.operators?.length ? ' → ' + pack.plan.operators.join(', ') : ''}`);
  out.push(`_${summary.join(' · ')}_`);
  if (pack.stale) {
    out.push('');
    const dirty = pack.dirty_files?.length ? `: ${pack.dirty_files.join(', ')}` : '';
    out.push(`> ⚠ The index is stale${dirty}`);
  }
  for (const note of pack.notes ?? []) {
    out.push('');
    out.push(`> Note: ${note}`);
  }
  if (!items.length && pack.reason) {
    out.push('');
    out.push(`> ${pack.reason}`);
  }
  items.forEach((item, i) => {
    out.push('');
    const heading = itemHeading(item);
    out.push(`## ${i + 1}. ${spanLabel(item)}${heading ? ' — ' + heading : ''}`);
    const meta: string[] = [];
    if (typeof item.tokens === 'number') meta.push(`${item.tokens} tokens`);
    if (typeof item.score === 'number') meta.push(`score ${formatNumber(item.score)}`);
    const reasons = uniqueReasons(item.reasons).map(reasonLabel);
    if (reasons.length) meta.push(`reasons: ${reasons.join('; ')}`);
    if (meta.length) {
      out.push('');
      out.push(meta.join(' · '));
    }
    if (item.text) {
      const text = item.text.replace(/\s+$/, '');
      const fence = fenceFor(text);
      out.push('');
      out.push(fence + languageOf(item.path));
      out.push(text);
      out.push(fence);
    }
  });
  out.push('');
  return out.join('\n');
}

export function escapeHtml(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

export interface HtmlOptions {
  nonce: string;
  cspSource: string;
  title?: string;
  /** Increases with every rendering (lets tests tell one rendering from the next). */
  seq?: number;
}

/** The body of the webview that shows a pack. Links and buttons post messages
 * (`{type: 'open', index}`, `{type: 'openAll'}`, `{type: 'copyMarkdown'}`) to the extension. */
export function packToHtml(pack: ContextPack, opt: HtmlOptions): string {
  const items = pack.items ?? [];
  const used = totalTokens(pack);
  const pct = pack.budget ? Math.min(100, Math.round((100 * used) / pack.budget)) : 0;
  const e = escapeHtml;
  const rows = items
    .map((item, i) => {
      const reasons = uniqueReasons(item.reasons)
        .map((r) => `<li>${RELATION[r.via] && r.from ? `${e(RELATION[r.via])} <code>${e(r.from)}</code>` : `<code>${e(r.via)}</code>${r.from ? ` from <code>${e(r.from)}</code>` : ''}`}${typeof r.weight === 'number' ? ` <span class="dim">(${e(formatNumber(r.weight))})</span>` : ''}</li>`)
        .join('');
      const meta = [item.kind, item.detail].filter(Boolean).map((s) => e(String(s))).join(' · ');
      const text = item.text ? `<details${i < 3 ? ' open' : ''}><summary>source</summary><pre><code>${e(item.text.replace(/\s+$/, ''))}</code></pre></details>` : '';
      return `<section class="item" data-index="${i}">
  <div class="head"><span class="rank">${i + 1}.</span>
    <a href="#" class="span-link" data-index="${i}" title="Open ${e(spanLabel(item))}">${e(spanLabel(item))}</a>
    ${item.symbol ? `<code class="sym">${e(item.symbol)}</code>` : ''}
    ${meta ? `<span class="dim">${meta}</span>` : ''}
    <span class="right">${typeof item.tokens === 'number' ? `${item.tokens} tokens` : ''}${typeof item.score === 'number' ? ` · score ${e(formatNumber(item.score))}` : ''}</span>
  </div>
  ${reasons ? `<ul class="reasons">${reasons}</ul>` : ''}
  ${text}
</section>`;
    })
    .join('\n');
  const plan = pack.plan?.trigger
    ? `<div class="dim">plan: <code>${e(pack.plan.trigger)}</code>${pack.plan.operators?.length ? ' → ' + pack.plan.operators.map((o) => `<code>${e(o)}</code>`).join(', ') : ''}${pack.plan.mentions?.length ? ' · mentions ' + pack.plan.mentions.map((m) => `<code>${e(m)}</code>`).join(', ') : ''}</div>`
    : '';
  const query = pack.query ?? '';
  const lines = query.split(/\r?\n/);
  const evidence = Object.entries(pack.plan?.evidence ?? {})
    .filter(([, v]) => (Array.isArray(v) ? v.length : typeof v === 'number' ? v > 0 : !!v))
    .map(([k, v]) => `${e(k)}: ${e(Array.isArray(v) ? String(v.length) : String(v))}`);
  const task = pack.plan?.task || lines.length > 1
    ? `<details id="task"><summary>${pack.plan?.task ? 'task text' : 'query'} · ${lines.length} line${lines.length === 1 ? '' : 's'} · ${query.length} characters${evidence.length ? ' · evidence ' + evidence.join(', ') : ''}</summary><pre>${e(query)}</pre></details>`
    : '';
  const stale = pack.stale
    ? `<div class="warn">⚠ The index is stale${pack.dirty_files?.length ? ': ' + pack.dirty_files.map((f) => `<code>${e(f)}</code>`).join(', ') : ''}</div>`
    : '';
  const notes = (pack.notes ?? []).map((n) => `<div class="warn">Note: ${e(n)}</div>`).join('');
  const empty = !items.length ? `<p class="empty">No context found.${pack.reason ? ' ' + e(pack.reason) : ''}</p>` : '';
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${opt.cspSource} 'nonce-${opt.nonce}'; script-src 'nonce-${opt.nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${e(opt.title ?? 'CTX Context')}</title>
<style nonce="${opt.nonce}">
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); padding: 0 16px 24px; }
h1 { font-size: 1.3em; margin: 12px 0 4px; }
.dim { color: var(--vscode-descriptionForeground); }
.warn { color: var(--vscode-editorWarning-foreground); margin: 6px 0; }
.toolbar { display: flex; gap: 8px; align-items: center; margin: 8px 0 12px; flex-wrap: wrap; }
button { background: var(--vscode-button-background); color: var(--vscode-button-foreground); border: none; padding: 4px 12px; cursor: pointer; }
button:hover { background: var(--vscode-button-hoverBackground); }
.budget { flex: 1; min-width: 160px; }
.bar { height: 6px; background: var(--vscode-editorWidget-border, #8884); border-radius: 3px; overflow: hidden; margin-top: 3px; }
.bar > div { height: 100%; background: var(--vscode-progressBar-background, #0a84ff); }
.item { border-top: 1px solid var(--vscode-editorWidget-border, #8884); padding: 6px 0; }
.head { display: flex; gap: 8px; align-items: baseline; flex-wrap: wrap; }
.rank { color: var(--vscode-descriptionForeground); }
.span-link { font-family: var(--vscode-editor-font-family); font-weight: 600; color: var(--vscode-textLink-foreground); text-decoration: none; }
.span-link:hover { text-decoration: underline; }
.right { margin-left: auto; color: var(--vscode-descriptionForeground); }
.reasons { margin: 2px 0 2px 18px; padding-left: 12px; }
pre { background: var(--vscode-textCodeBlock-background); padding: 6px 8px; overflow-x: auto; line-height: 1.45; font-family: var(--vscode-editor-font-family); font-size: var(--vscode-editor-font-size); }
#bar-fill { width: ${pct}%; }
summary { cursor: pointer; color: var(--vscode-descriptionForeground); }
</style></head>
<body data-seq="${opt.seq ?? 0}">
<h1>Context: ${e(opt.title && lines.length > 1 ? opt.title : query)}</h1>
${plan}
${task}
${stale}${notes}
<div class="toolbar">
  <button id="copy">Copy as Markdown</button>
  <button id="openAll"${items.length ? '' : ' disabled'}>Open All</button>
  <div class="budget"><span id="budget">${items.length} item${items.length === 1 ? '' : 's'} · ${e(budgetLabel(pack))}</span>
    <div class="bar"><div id="bar-fill"></div></div></div>
</div>
${empty}
${rows}
<script nonce="${opt.nonce}">
const vscode = acquireVsCodeApi();
document.getElementById('copy').addEventListener('click', () => vscode.postMessage({ type: 'copyMarkdown' }));
document.getElementById('openAll').addEventListener('click', () => vscode.postMessage({ type: 'openAll' }));
for (const a of document.querySelectorAll('.span-link')) {
  a.addEventListener('click', (ev) => { ev.preventDefault(); vscode.postMessage({ type: 'open', index: Number(a.dataset.index) }); });
}
</script>
</body></html>`;
}

// Pure helpers for the language-model tools and the @ctx participant (no `vscode` import:
// unit-tested with node --test). Shapes: docs/protocol.md, `ctx.symbolRelations`, `ctx.neighbourhood`.

export interface Location {
  path: string;
  line: number;
  uri?: string | null;
  symbol?: string | null;
  kind?: string | null;
  reason?: string | null;
}

export interface SymbolRelations {
  symbol: string | null;
  candidates?: string[] | null;
  relation: string;
  locations: Location[];
  reason?: string | null;
}

export interface GraphNode {
  id: string;
  label: string;
  kind: string;
  path?: string | null;
  symbol?: string | null;
  line?: number | null;
  uri?: string | null;
}

export interface GraphEdge {
  source: string;
  target: string;
  kind: string;
  count?: number;
  site?: { path: string; line: number; uri?: string | null } | null;
  via?: string | null;
}

export interface Neighbourhood {
  center: GraphNode | null;
  candidates?: string[] | null;
  nodes: GraphNode[];
  edges: GraphEdge[];
  truncated?: number;
  reason?: string | null;
}

/** The tools' inputs (package.json `languageModelTools[].inputSchema`). */
export interface GetContextInput {
  query: string;
  budget?: number;
}
export interface SymbolInput {
  symbol: string;
}
export interface TargetInput {
  target: string;
}

/** Input validation the model can act on: a message naming the field, or undefined when valid.
 * (VS Code does not check tool input against the schema.) */
export function checkInput(tool: string, input: unknown): string | undefined {
  if (!input || typeof input !== 'object' || Array.isArray(input)) return `${tool} expects an object input, got ${JSON.stringify(input)}`;
  const o = input as Record<string, unknown>;
  const str = (k: string): string | undefined => {
    const v = o[k];
    if (typeof v !== 'string') return `missing required string field '${k}'${v === undefined ? '' : `, got ${JSON.stringify(v)}`}`;
    if (!v.trim()) return `field '${k}' must not be empty`;
    return undefined;
  };
  switch (tool) {
    case 'ctx_getContext': {
      const e = str('query');
      if (e) return e;
      const b = o.budget;
      if (b !== undefined && (typeof b !== 'number' || !Number.isInteger(b) || b < 100 || b > 200000)) return `field 'budget' must be an integer from 100 to 200000, got ${JSON.stringify(b)}`;
      return undefined;
    }
    case 'ctx_findCallers':
    case 'ctx_testsFor':
      return str('symbol');
    case 'ctx_neighbours':
      return str('target');
    default:
      return `unknown tool ${tool}`;
  }
}

function ambiguity(asked: string, others: string[] | null | undefined): string {
  if (!others?.length) return '';
  return `\nnote: "${asked}" also matches ${others.join(', ')}; pass a qualified name (\`Class.method\` or \`path.py::Qual.name\`) to choose.`;
}

const RELATION_WORDS: Record<string, string> = {
  callers: 'callers of',
  callees: 'callees of',
  tests: 'tests for',
  references: 'references to',
  implementations: 'implementations of',
  importers: 'importers of',
};

/** `ctx.symbolRelations` as text for a model: one `path:line symbol (reason)` line per location. */
export function relationsText(asked: string, r: SymbolRelations): string {
  if (!r.symbol) return `No symbol found: ${r.reason ?? `unknown symbol: ${asked}`}`;
  const word = RELATION_WORDS[r.relation] ?? `${r.relation} of`;
  if (!r.locations.length) {
    const why = r.relation === 'tests'
      ? 'no test covers it (coverage) or calls it within 3 calls (static)'
      : 'nothing in the workspace index (static edges; dynamic dispatch such as getattr or callbacks is not seen)';
    return `No ${word.split(' ')[0]} found for ${r.symbol}: ${why}.${ambiguity(asked, r.candidates)}`;
  }
  // callers come once per call site: count the calling symbols, and the sites when there are more
  const callers = new Set(r.locations.map((l) => `${l.path}::${l.symbol ?? ''}`)).size;
  const head = r.relation === 'callers'
    ? `${callers} ${word} ${r.symbol}${r.locations.length > callers ? `, ${r.locations.length} call sites` : ''} (path:line is the call site):`
    : `${r.locations.length} ${word} ${r.symbol}:`;
  const lines = [head];
  for (const l of r.locations) lines.push(`- ${l.path}:${l.line} ${l.symbol ?? ''}${l.reason ? ` (${l.reason})` : ''}`.replace(/ +\(/, ' ('));
  return lines.join('\n') + ambiguity(asked, r.candidates);
}

function nodeLabel(n: GraphNode | undefined, id: string): string {
  if (!n) return id;
  if (n.kind === 'commit') return `commit ${n.label}`;
  if (n.kind === 'file') return n.path ?? n.label;
  return `${n.path}:${n.line} ${n.symbol ?? n.label} (${n.kind})`;
}

/** `ctx.neighbourhood` as text for a model, grouped by edge kind and direction. */
export function neighbourhoodText(asked: string, g: Neighbourhood): string {
  if (!g.center) return `Nothing found for "${asked}": ${g.reason ?? 'not in the index'}`;
  const c = g.center;
  const nodes = new Map(g.nodes.map((n) => [n.id, n]));
  const groups = new Map<string, string[]>();
  for (const e of g.edges) {
    const out = e.source === c.id;
    const other = out ? e.target : e.source;
    const key = `${e.kind} ${out ? '->' : '<-'}`;
    const site = e.site ? ` (site ${e.site.path}:${e.site.line}${(e.count ?? 1) > 1 ? `, ${e.count} edges` : ''})` : '';
    const via = e.via && c.kind === 'file' ? ` [${e.via}]` : '';
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key)!.push(`  - ${nodeLabel(nodes.get(other), other)}${via}${site}`);
  }
  const head = c.kind === 'file' ? c.path ?? c.label : `${c.symbol} (${c.kind} at ${c.path}:${c.line})`;
  const lines = [`${head}: typed 1-hop neighbourhood, ${g.nodes.length - 1} neighbours, ${g.edges.length} edges (-> from it, <- into it; site = where the edge is written)`];
  if (!g.edges.length) lines.push('(no edges: nothing in the workspace uses it, and it uses nothing in it)');
  for (const key of [...groups.keys()].sort()) {
    lines.push(key);
    lines.push(...groups.get(key)!);
  }
  if (g.truncated) lines.push(`... and ${g.truncated} more neighbours not listed`);
  return lines.join('\n') + ambiguity(asked, g.candidates);
}

/** The first line of a (task) text, shortened for titles. */
export function titleOf(query: string, max = 60): string {
  const first = query.trim().split(/\r?\n/).find((l) => l.trim()) ?? '';
  const t = first.trim();
  const more = query.trim().includes('\n');
  if (t.length > max) return t.slice(0, max - 1).trimEnd() + '…';
  return more ? t + ' …' : t;
}

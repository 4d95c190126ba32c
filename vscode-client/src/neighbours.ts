// Pure tree model for the result of `ctx.architecturalContext` (no `vscode` import).
// Shape: docs/protocol.md, "ctx.architecturalContext".

export interface Site {
  path?: string | null;
  line?: number | null;
  /** 0-based code-point column of the site. */
  col?: number | null;
  uri?: string | null;
}

export interface Neighbour {
  path?: string | null;
  uri?: string | null;
  symbol?: string | null;
  kind?: string | null;
  line?: number | null;
  site?: Site | null;
  resolver?: string | null;
  from_symbol?: string | null;
  /** IMPORTS: the imported names. */
  names?: string[] | null;
  /** TOUCHED: the commit (such neighbours have no file: `uri` is null). The server sends an object
   * (docs/protocol.md); a bare hash string is taken too. */
  commit?: CommitInfo | string | null;
}

export interface CommitInfo {
  hash?: string | null;
  date?: string | null;
  author?: string | null;
  email?: string | null;
  subject?: string | null;
}

/** A commit for a tooltip: `0123456789 2021-02-01 Bob: Fix sub sign handling`. */
export function commitText(commit: CommitInfo | string): string {
  if (typeof commit === 'string') return commit;
  const who = [commit.date?.slice(0, 10), commit.author].filter(Boolean).join(' ');
  return [commitHash(commit), who ? `${who}:` : '', commit.subject ?? ''].filter(Boolean).join(' ');
}

/** The short hash of a neighbour's commit, whichever shape it came in. */
export function commitHash(commit: CommitInfo | string | null | undefined): string {
  if (!commit) return '';
  return (typeof commit === 'string' ? commit : commit.hash ?? '').slice(0, 10);
}

export interface NeighbourGroup {
  edge: string;
  direction: 'out' | 'in' | string;
  neighbors?: Neighbour[] | null;
}

export interface ArchitecturalContext {
  uri?: string | null;
  path?: string | null;
  groups?: NeighbourGroup[] | null;
  reason?: string | null;
}

/** Where a tree node points to: a URI (or a workspace-relative path) and a 1-based line. */
export interface Target {
  uri?: string;
  path?: string;
  line: number;
  /** 0-based column, when known (edge sites). */
  character?: number;
}

export interface TreeNode {
  id: string;
  kind: 'group' | 'neighbour' | 'site';
  label: string;
  description?: string;
  tooltip?: string;
  target?: Target;
  children: TreeNode[];
}

export function arrowFor(direction: string): string {
  if (direction === 'out') return '→';
  if (direction === 'in') return '←';
  return '↔';
}

/** "IMPORTS →" for outgoing edges (this file imports ...), "CALLS ←" for incoming ones. */
export function groupLabel(g: NeighbourGroup): string {
  return `${g.edge} ${arrowFor(g.direction)}`;
}

function groupTooltip(g: NeighbourGroup, file: string): string {
  const edge = g.edge.toLowerCase().replace(/_/g, ' ');
  return g.direction === 'in' ? `Code that ${edge} ${file}` : `What ${file} ${edge}`;
}

function baseName(p: string): string {
  const i = p.lastIndexOf('/');
  return i >= 0 ? p.slice(i + 1) : p;
}

function target(uri: string | null | undefined, path: string | null | undefined, line: number | null | undefined, col?: number | null): Target | undefined {
  if (!uri && !path) return undefined;
  const t: Target = { line: line && line > 0 ? line : 1 };
  if (uri) t.uri = uri;
  if (path) t.path = path;
  if (typeof col === 'number' && col >= 0) t.character = col;
  return t;
}

export function neighbourLabel(n: Neighbour): string {
  if (n.commit) {
    // `0123456789 Fix sub sign handling` (the server names a commit node by its short hash: not twice)
    const hash = commitHash(n.commit);
    const full = typeof n.commit === 'string' ? n.commit : n.commit.hash ?? '';
    const text = typeof n.commit === 'string' ? n.symbol : n.commit.subject ?? n.symbol;
    return [hash, text && !full.startsWith(text) ? text : ''].filter(Boolean).join(' ') || '?';
  }
  if (n.symbol) return n.symbol;
  return n.path ?? n.uri ?? '?';
}

/** `→ OrderService.place_order · tests/test_service.py:4` (incoming) or `from OrderService.find · ...`
 * (outgoing): which symbol of this file the edge
 * reaches (incoming) or leaves from (outgoing), then where the neighbour is. */
export function neighbourDescription(n: Neighbour, direction: string, where: string | undefined): string | undefined {
  const parts: string[] = [];
  if (n.names?.length) parts.push(n.names.join(', '));
  if (n.from_symbol) parts.push(direction === 'in' ? `→ ${n.from_symbol}` : `from ${n.from_symbol}`);
  if (n.commit) {
    // a commit: no file position
  } else if (n.symbol) {
    if (where) parts.push(where);
  } else if (n.line && n.line > 1) {
    parts.push(`:${n.line}`);
  }
  return parts.length ? parts.join(' · ') : undefined;
}

/** The tree shown in the "CTX Neighbours" view: groups (edge kind + direction), then
 * neighbours (click opens the neighbour), each with its site as a child (click opens the site). */
export function buildNeighbourTree(result: ArchitecturalContext): TreeNode[] {
  const file = result.path ?? result.uri ?? 'this file';
  const groups = (result.groups ?? []).filter((g) => (g.neighbors ?? []).length > 0);
  // Outgoing before incoming, then by edge kind, stable otherwise.
  const order = (d: string) => (d === 'out' ? 0 : d === 'in' ? 1 : 2);
  const sorted = groups
    .map((g, i) => ({ g, i }))
    .sort((a, b) => order(a.g.direction) - order(b.g.direction) || a.g.edge.localeCompare(b.g.edge) || a.i - b.i)
    .map((x) => x.g);
  return sorted.map((g, gi) => {
    const gid = `g${gi}:${g.edge}:${g.direction}`;
    const children = (g.neighbors ?? []).map((n, ni): TreeNode => {
      const nid = `${gid}/n${ni}`;
      const where = n.path ? `${n.path}${n.line ? ':' + n.line : ''}` : undefined;
      const site = n.site;
      const siteChildren: TreeNode[] = [];
      const siteTarget = site ? target(site.uri, site.path, site.line, site.col) : undefined;
      if (site && siteTarget) {
        const sitePath = site.path ?? site.uri ?? '';
        siteChildren.push({
          id: `${nid}/site`,
          kind: 'site',
          label: `site: ${baseName(sitePath)}${site.line ? ':' + site.line : ''}`,
          description: [n.from_symbol, n.resolver].filter(Boolean).join(' · ') || undefined,
          tooltip: `${sitePath}${site.line ? ':' + site.line : ''}${n.resolver ? `\nresolved by ${n.resolver}` : ''}`,
          target: siteTarget,
          children: [],
        });
      }
      const tooltipLines = [
        `${n.symbol ? n.symbol + ' ' : ''}${n.kind ? '(' + n.kind + ')' : ''}`.trim(),
        where ?? '',
        site?.path ? `site: ${site.path}${site.line ? ':' + site.line : ''}` : '',
        n.names?.length ? `imports: ${n.names.join(', ')}` : '',
        n.commit ? `commit: ${commitText(n.commit)}` : '',
        n.resolver ? `resolver: ${n.resolver}` : '',
      ].filter(Boolean);
      return {
        id: nid,
        kind: 'neighbour',
        label: neighbourLabel(n),
        description: neighbourDescription(n, g.direction, where),
        tooltip: tooltipLines.join('\n'),
        target: n.commit && !n.uri ? undefined : target(n.uri, n.path, n.line),
        children: siteChildren,
      };
    });
    return {
      id: gid,
      kind: 'group',
      label: groupLabel(g),
      description: String(children.length),
      tooltip: groupTooltip(g, file),
      children,
    };
  });
}

/** Total number of neighbours in a result. */
export function neighbourCount(result: ArchitecturalContext): number {
  return (result.groups ?? []).reduce((n, g) => n + (g.neighbors ?? []).length, 0);
}

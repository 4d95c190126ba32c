// Pure helpers for the status bar (no `vscode` import). Payload: docs/protocol.md, "ctx.indexStatus".

export interface IndexStatus {
  roots?: string[] | null;
  files?: number | null;
  nodes?: number | null;
  edges?: Record<string, number> | number | null;
  dirty_files?: string[] | null;
  stale?: boolean | null;
  indexing?: boolean | null;
  refinement?: { done?: number | null; total?: number | null } | null;
  last_update?: string | null;
  folders?: { name?: string | null; state?: string | null; error?: string | null; files?: number | null }[] | null;
}

export function edgeTotal(s: IndexStatus): number {
  if (typeof s.edges === 'number') return s.edges;
  return Object.values(s.edges ?? {}).reduce((n, v) => n + (typeof v === 'number' ? v : 0), 0);
}

export interface StatusView {
  text: string;
  tooltip: string;
  warning: boolean;
  busy: boolean;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export interface ProgressView {
  title?: string;
  message?: string;
  percentage?: number;
}

/** What a work-done progress says the server is doing, from its title ("ctx-lsp: indexing",
 *  "ctx-lsp: waiting for git"); "indexing" when it has none. */
export function activity(progress?: ProgressView): string {
  const t = progress?.title?.replace(/^ctx-lsp:\s*/, '').trim();
  return t ? t : 'indexing';
}

/** Status bar text for an indexStatus payload, plus an optional work-done progress. */
export function statusView(s: IndexStatus | undefined, progress?: ProgressView): StatusView {
  const doing = activity(progress);
  const Doing = doing.charAt(0).toUpperCase() + doing.slice(1);
  if (!s) {
    const pct = progress?.percentage !== undefined ? ` ${Math.round(progress.percentage)}%` : '';
    return { text: `$(sync~spin) ctx: ${doing}${pct}…`, tooltip: progress?.message ?? 'ctx-lsp is indexing the workspace', warning: false, busy: true };
  }
  const files = s.files ?? 0;
  const edges = edgeTotal(s);
  const dirty = s.dirty_files ?? [];
  const tooltip: string[] = [`ctx-lsp: ${plural(files, 'file')}, ${plural(s.nodes ?? 0, 'node')}, ${plural(edges, 'edge')}`];
  if (s.edges && typeof s.edges === 'object') {
    const kinds = Object.entries(s.edges).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`);
    if (kinds.length) tooltip.push(kinds.join(' · '));
  }
  const ref = s.refinement;
  if (ref && typeof ref.total === 'number' && ref.total > 0) tooltip.push(`Jedi refinement: ${ref.done ?? 0}/${ref.total}`);
  if (s.stale) tooltip.push(`Stale${dirty.length ? ': ' + dirty.join(', ') : ''}`);
  const failed = (s.folders ?? []).filter((f) => f.state === 'failed' || f.state === 'cancelled');
  for (const f of failed) tooltip.push(`Folder ${f.name ?? '?'}: indexing ${f.state}${f.error ? ': ' + f.error : ''}`);
  if (s.last_update) tooltip.push(`Last update: ${s.last_update}`);
  tooltip.push('Click for actions');
  if (s.indexing || progress) {
    const pct = progress?.percentage !== undefined ? ` ${Math.round(progress.percentage)}%` : '';
    const what = progress ? doing : 'indexing';
    if (progress?.message) tooltip.unshift(`${progress ? Doing : 'Indexing'}: ${progress.message}`);
    return { text: `$(sync~spin) ctx: ${what}${pct}…${files ? ' ' + plural(files, 'file') : ''}`, tooltip: tooltip.join('\n'), warning: false, busy: true };
  }
  const stale = s.stale ? ` · $(warning) stale${dirty.length ? ` (${dirty.length})` : ''}` : '';
  const failure = failed.some((f) => f.state === 'failed') ? ' · $(error) indexing failed' : '';
  return { text: `$(database) ctx: ${plural(files, 'file')} · ${plural(edges, 'edge')}${stale}${failure}`, tooltip: tooltip.join('\n'), warning: !!s.stale || !!failure, busy: false };
}

// Pure helpers for settings (no `vscode` import).

export interface InitializationOptions {
  budget: number;
  include: string[];
  exclude: string[];
  cacheDir: string;
  jediRefinement: boolean;
  codeLens: boolean;
}

export const DEFAULTS: InitializationOptions = {
  budget: 4000,
  include: [],
  exclude: [],
  cacheDir: '',
  jediRefinement: true,
  codeLens: true,
};

/** Reads `ctxLsp.<key>` through `get` (e.g. WorkspaceConfiguration.get) and validates types. */
export function initializationOptions(get: (key: string) => unknown, expand: (s: string) => string = (s) => s): InitializationOptions {
  const budget = get('budget');
  const include = get('include');
  const exclude = get('exclude');
  const cacheDir = get('cacheDir');
  const jedi = get('jediRefinement');
  const codeLens = get('codeLens');
  const strings = (v: unknown, d: string[]) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : d);
  return {
    budget: typeof budget === 'number' && Number.isFinite(budget) && budget > 0 ? Math.floor(budget) : DEFAULTS.budget,
    include: strings(include, DEFAULTS.include),
    exclude: strings(exclude, DEFAULTS.exclude),
    cacheDir: typeof cacheDir === 'string' && cacheDir.trim() ? expand(cacheDir.trim()) : DEFAULTS.cacheDir,
    jediRefinement: typeof jedi === 'boolean' ? jedi : DEFAULTS.jediRefinement,
    codeLens: typeof codeLens === 'boolean' ? codeLens : DEFAULTS.codeLens,
  };
}

/** The settings as the user wrote them, for the server: unset keys get their defaults, a set value
 * goes as it is (a path setting expanded), so that the server checks it and says what it does with an
 * invalid one (`window/showMessage`: "invalid value -5 for 'budget'; using the default 4000") rather
 * than the extension replacing it in silence. `initializationOptions` is what the extension itself uses. */
export function serverSettings(get: (key: string) => unknown, expand: (s: string) => string = (s) => s): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, fallback] of Object.entries(DEFAULTS)) {
    const v = get(key);
    out[key] = v === undefined || v === null ? fallback : key === 'cacheDir' && typeof v === 'string' ? (v.trim() ? expand(v.trim()) : '') : v;
  }
  return out;
}

/** Expands `~`, `${workspaceFolder}`, `${userHome}` and `${env:NAME}` in a path setting. */
export function expandPath(value: string, vars: { home: string; workspaceFolder?: string; env?: Record<string, string | undefined> }): string {
  let v = value.trim();
  if (v === '~' || v.startsWith('~/')) v = vars.home + v.slice(1);
  v = v.replace(/\$\{userHome\}/g, vars.home);
  if (vars.workspaceFolder !== undefined) v = v.replace(/\$\{workspaceFolder\}/g, vars.workspaceFolder);
  v = v.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => vars.env?.[name] ?? '');
  return v;
}

/** Settings whose change needs a server restart (everything under ctxLsp except tracing). */
export const RESTART_KEYS = ['interpreter', 'budget', 'include', 'exclude', 'cacheDir', 'jediRefinement', 'codeLens'];

/** Quotes an argument for the shell of a terminal (POSIX sh or PowerShell). */
export function shellQuote(arg: string, windows = false): string {
  if (/^[A-Za-z0-9_@%+=:,./\\-]+$/.test(arg)) return arg;
  if (windows) return `& '${arg.replace(/'/g, "''")}'`;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

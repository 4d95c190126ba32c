// Bundle the extension (and vscode-languageclient) into dist/extension.js, and the graph
// webview's script (with cytoscape) into dist/graph.js.
import * as esbuild from 'esbuild';

const production = process.argv.includes('--production');
const watch = process.argv.includes('--watch');

const common = { bundle: true, minify: production, sourcemap: !production, sourcesContent: false, logLevel: 'info' };
const contexts = [
  await esbuild.context({
    ...common,
    entryPoints: ['src/extension.ts'],
    format: 'cjs',
    platform: 'node',
    target: 'node18',
    outfile: 'dist/extension.js',
    external: ['vscode'],
  }),
  await esbuild.context({
    ...common,
    entryPoints: ['webview/graph.ts'],
    format: 'iife',
    platform: 'browser',
    target: 'es2020',
    outfile: 'dist/graph.js',
  }),
];
if (watch) {
  await Promise.all(contexts.map((c) => c.watch()));
} else {
  for (const c of contexts) {
    await c.rebuild();
    await c.dispose();
  }
}

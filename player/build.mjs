// Bundles the player page into dist/: index.html, the HUD stylesheet and an ES-module entry
// that loads hls.js or dash.js on demand (code splitting), so a page playing HLS never
// downloads dash.js over an emulated, possibly slow, path.
import { build } from 'esbuild';
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeRulesModule } from './abr-rules.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');

// Our adaptation rules' list (src/abr/rules.js), from the catalog; refused when a rule's name
// and module do not match (abr-rules.mjs).
writeRulesModule();
await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
await build({
  entryPoints: [join(here, 'src', 'main.js')],
  bundle: true,
  splitting: true,
  format: 'esm',
  target: ['chrome100', 'safari15', 'firefox100'],
  minify: true,
  sourcemap: true,
  outdir: dist,
  entryNames: '[name]',
  chunkNames: 'chunks/[name]-[hash]',
  legalComments: 'linked',
  logLevel: 'warning',
});
for (const file of ['index.html', 'hud.css']) {
  await copyFile(join(here, 'src', file), join(dist, file));
}
console.log(`player bundle written to ${dist}`);

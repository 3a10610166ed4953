// Our adaptation rules as the page imports them: src/abr/rules.js, written here from the catalog
// (src/abr/catalog.json, its "ours") each time the bundle is built (build.mjs, `make
// player-bundle`). A rule of ours is two things: its entry in the catalog (name, about, params)
// and its module, src/abr/rules/NAME.js, which exports `decide(inputs, params)` (docs/abr.md).
// A name without its module, or a module the catalog does not name, is refused here with what
// to do; the command line checks the same (mpstream/player/abr.py), and
// player/tests/abr-engine.test.mjs that the written file is current.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ABR_DIR = join(dirname(fileURLToPath(import.meta.url)), 'src', 'abr');

const HEADER = `// Written by player/abr-rules.mjs from catalog.json ("ours") when the bundle is built
// (\`make player-bundle\`): do not edit. Our rules by name, each its module's decide(inputs, params).
`;

/** The text of rules.js for the catalog's rules of ours (`ours`: names in the catalog's order) and the rule modules there are (`modules`: file names in rules/). */
export function rulesModule(ours, modules) {
  const files = new Set(modules.filter((f) => f.endsWith('.js')));
  const missing = ours.filter((name) => !files.has(`${name}.js`));
  if (missing.length) {
    throw new Error(`catalog.json names ${missing.join(', ')} among our rules, but player/src/abr/rules/ has no ` +
      `${missing.map((n) => `${n}.js`).join(', ')}: write the module (it exports decide(inputs, params)) or remove the entry`);
  }
  const unnamed = [...files].filter((f) => !ours.includes(f.slice(0, -3))).sort();
  if (unnamed.length) {
    throw new Error(`player/src/abr/rules/${unnamed.join(', ')}: a rule module that catalog.json does not name: ` +
      'add its entry under "ours" (about, params) or move the file out of rules/');
  }
  const ident = (name) => `rule_${name.replace(/-/g, '_')}`;
  const imports = ours.map((name) => `import { decide as ${ident(name)} } from './rules/${name}.js';\n`);
  const entries = ours.map((name) => `  '${name}': ${ident(name)},\n`);
  return `${HEADER}${imports.join('')}\nexport const RULES = {\n${entries.join('')}};\n`;
}

/** Our rules' names, in the catalog's order. */
export function ourRules(abrDir = ABR_DIR) {
  return Object.keys(JSON.parse(readFileSync(join(abrDir, 'catalog.json'), 'utf8')).ours);
}

/** rules.js as the catalog and the rule modules in `abrDir` make it (refused as above). */
export function currentRulesModule(abrDir = ABR_DIR) {
  return rulesModule(ourRules(abrDir), readdirSync(join(abrDir, 'rules')));
}

/** Writes rules.js when it differs (an unchanged file keeps its time: the bundle's make rule reads it). */
export function writeRulesModule(abrDir = ABR_DIR) {
  const text = currentRulesModule(abrDir);
  const path = join(abrDir, 'rules.js');
  if (!existsSync(path) || readFileSync(path, 'utf8') !== text) writeFileSync(path, text);
  return path;
}

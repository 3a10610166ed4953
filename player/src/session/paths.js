// The transport's per-path figures, for an adaptation rule that reads them (abr/rules/multipath.js):
// the page asks the collector every second, which reads the kernel's figures of this browser's
// connections (server/seen.py: paths), and hands each answer to the rule's engine. Only a rule
// that reads paths is asked for (catalog.json "inputs"). Where a program beside the browser
// carries the session (seen_by=carrier), the server sees that program's connections, not the
// paths: the page asks the carrier instead when it answers with figures of its own (paths_url:
// mphttp's proxy), and otherwise asks nothing and the rule goes by its downloads (the QUIC hop).

export const PATHS_EVERY_MS = 1000;

async function ask(url) {
  try {
    const resp = await fetch(url, { cache: 'no-store' });
    return resp.ok ? await resp.json() : null;
  } catch {
    return null; // the next second asks again; the rule keeps what it has
  }
}

/** Where the session's per-path figures come from, or null where nothing has them. */
export function pathsUrlOf(config) {
  if (config.pathsUrl) return config.pathsUrl;
  if (config.seenBy === 'carrier') return null;
  return `${config.collector}/sessions/${encodeURIComponent(config.session)}/paths`;
}

/** Starts asking when the session's rule wants the paths; resolves once the first answer is in. */
export async function watchPaths(session) {
  const { config, adapter, timers } = session;
  const engine = adapter.abrEngine;
  const url = pathsUrlOf(config);
  if (!engine || !engine.wantsPaths || url === null) return;
  const update = async () => engine.pathsSeen(await ask(url), performance.now(), config.spared);
  timers.paths = setInterval(update, PATHS_EVERY_MS);
  await update();
}

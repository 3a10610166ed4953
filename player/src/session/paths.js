// The transport's per-path figures, for an adaptation rule that reads them (abr/rules/multipath.js):
// the page asks the collector every second, which reads the kernel's figures of this browser's
// connections (server/seen.py: paths), and hands each answer to the rule's engine. Only a rule
// that reads paths is asked for (catalog.json "inputs"). Where a program beside the browser
// carries the session (the QUIC hop, mphttp: seen_by=carrier), the server sees that program's
// connections, not the paths, so nothing is asked and the rule goes by its downloads.

export const PATHS_EVERY_MS = 1000;

async function ask(url) {
  try {
    const resp = await fetch(url, { cache: 'no-store' });
    return resp.ok ? await resp.json() : null;
  } catch {
    return null; // the next second asks again; the rule keeps what it has
  }
}

/** Starts asking when the session's rule wants the paths; resolves once the first answer is in. */
export async function watchPaths(session) {
  const { config, adapter, timers } = session;
  const engine = adapter.abrEngine;
  if (!engine || !engine.wantsPaths || config.seenBy === 'carrier') return;
  const url = `${config.collector}/sessions/${encodeURIComponent(config.session)}/paths`;
  const update = async () => engine.pathsSeen(await ask(url), performance.now(), config.spared);
  timers.paths = setInterval(update, PATHS_EVERY_MS);
  await update();
}

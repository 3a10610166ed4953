// What carries the session's requests, as the server measured it: the page asks the collector,
// which looks the asking request's own connection up in the server's kernel (MPTCP and its
// subflows, or TCP; server/seen.py) and keeps the answer with the session. The browser's
// connections to one origin share a pool, so the connection asked about is one the media
// requests use too. Asked again every few seconds: an MPTCP connection's extra subflows join
// after its first request, and a new connection may replace an idle one.
//
// Where a program beside the browser carries the session (the QUIC hop, mphttp: seen_by=carrier),
// the server sees only that program's connections; the carrier counts its own paths (in the
// trial's record), and the page shows the transport the session asked for.

const REMEASURE_MS = 5000;

/** The HUD's text for the collector's answer (or a failure to get one). */
export function transportText(answer, declared) {
  if (answer && answer.measured) return answer.label;
  const reason = answer && answer.reason ? answer.reason : 'no answer from the collector';
  const asked = declared && declared !== 'unknown' ? `${declared.toUpperCase()} asked; ` : '';
  return `${asked}not measured: ${reason}`;
}

async function measure(url) {
  try {
    const resp = await fetch(url, { method: 'POST', cache: 'no-store' });
    if (!resp.ok) return { measured: false, reason: `the collector answered ${resp.status}` };
    return await resp.json();
  } catch (err) {
    return { measured: false, reason: `the collector did not answer (${err.message || err})` };
  }
}

/** Starts the transport's measurement; resolves once the first answer (or failure) is in. */
export async function watchTransport(session) {
  const { config, hud, timers } = session;
  if (config.seenBy === 'carrier') {
    hud.update({ transport: `${config.transport.toUpperCase()} (carried by a proxy beside the browser)` });
    return;
  }
  const url = `${config.collector}/sessions/${encodeURIComponent(config.session)}/transport`;
  const update = async () => {
    const answer = await measure(url);
    hud.update({ transport: transportText(answer, config.transport) });
  };
  timers.transport = setInterval(update, REMEASURE_MS);
  await update();
}

// Step 2, start: the play request, t=0 of startup delay and of the session's duration; the
// startup deadline; then the player library is asked to load and play.
import { endSession, failSession } from './end.js';

// How long the play request waits for the collector at most: a slow collector delays the
// session's start by this much, never fails it (the sender retries what is unsent).
export const READY_WAIT_MS = 3000;

/**
 * Before the play request: the sender creates the session at the collector and `transportAsked`
 * (the first transport answer) settles, or READY_WAIT_MS passes. Over HTTP/1.1 each request in
 * flight holds a connection of its own, so these requests, made at the play request, sent the
 * manifest or the first segment onto a new connection (a handshake more, and for MPTCP a
 * connection whose second subflow has not joined yet) in some sessions and not in others.
 */
export async function collectorReady(session, transportAsked, waitMs = READY_WAIT_MS) {
  let timer = null;
  const waited = new Promise((resolve) => {
    timer = setTimeout(resolve, waitMs);
  });
  try {
    await Promise.race([Promise.all([session.sender.flush(), transportAsked]), waited]);
  } finally {
    clearTimeout(timer);
  }
}

export function startPlayback(session) {
  const { config, control, hud, probe, sender, adapter, video, timers } = session;
  control.state = 'starting';
  hud.update({ status: 'starting' });
  probe.playRequested();
  sender.flush();
  if (config.duration) timers.duration = setTimeout(() => endSession(session, 'duration'), config.duration * 1000);
  timers.startup = setTimeout(() => {
    if (probe.started) return;
    const message = `no frame rendered within ${config.startupTimeout} s of the play request (${config.src})`;
    probe.error({ message, fatal: true, code: 'startup_timeout' });
    failSession(session, message);
  }, config.startupTimeout * 1000);
  video.muted = true;
  try {
    adapter.start();
  } catch (err) {
    probe.error({ message: String(err.message || err), fatal: true, code: 'start' });
    failSession(session, String(err.message || err));
  }
}

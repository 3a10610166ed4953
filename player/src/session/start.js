// Step 2, start: the play request, t=0 of startup delay and of the session's duration; the
// startup deadline; then the player library is asked to load and play.
import { endSession, failSession } from './end.js';

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

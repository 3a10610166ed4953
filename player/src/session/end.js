// Step 4, end: the duration reached, the stream ended, a fatal error, or the page closed.
// Stops the watchers and the player, sends the end record and waits for unsent events.
import { showProblem } from '../problem.js';
import { hudView, playbackSample } from './media.js';

/** A fatal failure: the first one is the session's failure; the session ends with `error`. */
export function failSession(session, message) {
  if (session.failed) return;
  session.failed = message;
  session.control.failure = message;
  showProblem(message);
  endSession(session, 'error');
}

async function finish(session, reason) {
  const { video, probe, sender, adapter, hud, control, config, timers } = session;
  control.state = 'finishing';
  const sample = playbackSample(video); // before the player is stopped (dash.js resets it)
  clearInterval(timers.watch);
  clearInterval(timers.sampler);
  clearInterval(timers.transport);
  clearInterval(timers.paths);
  clearTimeout(timers.duration);
  clearTimeout(timers.startup);
  if (probe.started) probe.sample(sample);
  hud.update({ ...hudView(session), status: reason === 'error' ? 'failed' : 'ended' });
  video.pause();
  try {
    adapter.stop();
  } catch (err) {
    console.warn('stopping the player:', err);
  }
  let endReason = reason;
  const drainMs = config.reportTimeout * 1000; // the page parameter report_timeout
  if (sender.failures > 0) {
    // The collector has been failing: give it time before the session is declared unreported.
    await sender.drain(drainMs);
    if (sender.pending > 0) {
      const message = `collector unreachable at ${config.collector}: ${sender.lastError}`;
      probe.error({ message, fatal: true, code: 'collector_unreachable' });
      endReason = 'error';
      control.failure = control.failure || message;
    }
  }
  probe.end({ reason: endReason, position: sample.position });
  await sender.drain(sender.failures > 0 ? Math.min(2000, drainMs) : drainMs);
  control.state = 'done';
  return control.report();
}

/** Ends the session once; later calls get the same promise (resolving to the report). */
export function endSession(session, reason) {
  if (!session.finishing) session.finishing = finish(session, reason);
  return session.finishing;
}

/** The page closing: an end record if there was none, and what is unsent goes by beacon. */
export function watchPageClose({ probe, sender, video }) {
  window.addEventListener('pagehide', () => {
    if (!probe.ended) probe.end({ reason: 'closed', position: video.currentTime });
    sender.beaconFlush();
  });
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'hidden') sender.beaconFlush();
  });
}

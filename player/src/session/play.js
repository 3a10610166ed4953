// Step 3, play: follow the media element while the session runs. The first frame ends
// startup; a stall is `waiting` with an empty buffer after startup (a watchdog catches a
// playhead frozen without `waiting`), and it ends at the first frame presented past where
// playback stopped; the probe samples position, buffer and frames every second.
import { endSession, failSession } from './end.js';
import { bufferAhead, hudView, playbackSample } from './media.js';

const SAMPLE_INTERVAL_MS = 1000;
const WATCH_INTERVAL_MS = 250;
// A playhead that has not moved for this long while playing, with an empty buffer, is stalled
// even if the media element never said `waiting`.
const FROZEN_MS = 1000;

function onFirstFrame(session, t) {
  const { probe, adapter, control, hud } = session;
  if (probe.started || probe.ended) return;
  probe.firstFrame(t, adapter.rendition() || probe.rendition || {});
  control.state = 'playing';
  hud.update({ ...hudView(session), status: 'playing' });
}

/** The first frame: requestVideoFrameCallback where there is one, else the playhead moving. */
function watchFirstFrame(session) {
  const { video, probe } = session;
  if (typeof video.requestVideoFrameCallback === 'function') {
    video.requestVideoFrameCallback((now, meta) => onFirstFrame(session, Math.min(now, meta.presentationTime || now)));
  }
  let startPosition = null;
  video.addEventListener('playing', () => {
    if (startPosition === null) startPosition = video.currentTime;
    probe.resumed({ position: video.currentTime });
  });
  video.addEventListener('timeupdate', () => {
    if (startPosition !== null && video.currentTime > startPosition + 0.01 && !probe.started) {
      onFirstFrame(session, performance.now());
    }
  });
}

/** Asks for presented frames until one lies past the stall's position: the stall's end. */
function watchResume({ video, probe }) {
  if (typeof video.requestVideoFrameCallback !== 'function') return;
  const onFrame = (now, meta) => {
    if (!probe.stalled) return;
    if (!probe.resumed({ position: meta.mediaTime, tMs: Math.min(now, meta.presentationTime || now) })) {
      video.requestVideoFrameCallback(onFrame);
    }
  };
  video.requestVideoFrameCallback(onFrame);
}

function maybeStalled(session, position) {
  const { video, probe } = session;
  const stalled = probe.waiting({ position, bufferAhead: bufferAhead(video), seeking: video.seeking, duration: video.duration });
  if (stalled) watchResume(session);
}

function watchStalls(session) {
  const { video, probe, timers } = session;
  video.addEventListener('waiting', () => maybeStalled(session, video.currentTime));
  video.addEventListener('timeupdate', () => {
    if (probe.stalled) probe.resumed({ position: video.currentTime });
  });
  let lastPosition = -1;
  let lastMoveAt = performance.now();
  timers.watch = setInterval(() => {
    const now = performance.now();
    const t = video.currentTime;
    if (probe.stalled) probe.resumed({ position: t });
    if (t !== lastPosition) {
      lastPosition = t;
      lastMoveAt = now;
    } else if (!video.paused && !video.seeking && !video.ended && now - lastMoveAt > FROZEN_MS) {
      maybeStalled(session, t);
    }
  }, WATCH_INTERVAL_MS);
}

function watchSamples(session) {
  const { video, probe, hud, timers, adapter } = session;
  timers.sampler = setInterval(() => {
    if (probe.started) {
      probe.sample(playbackSample(video));
      const live = adapter.liveLatency ? adapter.liveLatency() : null;
      if (live) probe.liveLatency(live);
    }
    hud.update(hudView(session));
  }, SAMPLE_INTERVAL_MS);
}

/** The element's own end and errors. */
function watchElementEnd(session) {
  const { video, probe, adapter } = session;
  video.addEventListener('ended', () => endSession(session, 'ended'));
  video.addEventListener('error', () => {
    const err = video.error;
    const message = `media element error ${err ? err.code : ''}: ${err && err.message ? err.message : 'no detail'}`;
    // dash.js resets the Media Source and carries on after a decode error (and reports an
    // ERROR when it gives up); for other players the element's error ends playback.
    const fatal = !adapter.recoversMediaErrors;
    probe.error({ message, fatal, code: err ? `media_${err.code}` : null });
    if (fatal) failSession(session, message);
  });
}

export function watchPlayback(session) {
  watchFirstFrame(session);
  watchStalls(session);
  watchSamples(session);
  watchElementEnd(session);
}

// The player page: reads its query parameters, loads the chosen player library, wires the QoE
// probe to the media element and to the collector, and exposes `window.mpstream` so that an
// automated session (player/session.py) can follow and end it.
import { createHud } from './hud.js';
import { parseParams } from './probe/params.js';
import { QoeProbe } from './probe/probe.js';
import { EventSender } from './probe/sender.js';

const SAMPLE_INTERVAL_MS = 1000;
const WATCH_INTERVAL_MS = 250;
// After the end record: how long unsent events may take to reach the collector.
const DRAIN_TIMEOUT_MS = 15000;
// A playhead that has not moved for this long while playing, with an empty buffer, is stalled
// even if the media element never said `waiting`.
const FROZEN_MS = 1000;

const ADAPTERS = {
  hlsjs: () => import('./adapters/hlsjs.js'),
  dashjs: () => import('./adapters/dashjs.js'),
};

function bufferAhead(video) {
  const t = video.currentTime;
  const ranges = video.buffered;
  for (let i = 0; i < ranges.length; i += 1) {
    // A small tolerance: the playhead may sit just before a range that starts at a gap.
    if (ranges.start(i) - 0.1 <= t && t < ranges.end(i)) return ranges.end(i) - t;
  }
  return 0;
}

function frameCounts(video) {
  if (typeof video.getVideoPlaybackQuality === 'function') {
    const q = video.getVideoPlaybackQuality();
    return { droppedFrames: q.droppedVideoFrames, totalFrames: q.totalVideoFrames };
  }
  return { droppedFrames: video.webkitDroppedFrameCount || 0, totalFrames: video.webkitDecodedFrameCount || 0 };
}

function showProblem(text) {
  const box = document.getElementById('problem');
  box.textContent = text;
  box.hidden = false;
}

async function run() {
  const video = document.getElementById('video');
  const hud = createHud(document.getElementById('hud'));
  const { config, errors } = parseParams(location.search);
  const api = {
    config,
    state: 'loading',
    failure: null,
    report: () => ({ state: api.state, failure: api.failure }),
    finish: async () => api.report(),
  };
  window.mpstream = api;
  hud.update({ transport: config.transport, player: config.player, status: 'loading' });
  if (errors.length) {
    api.state = 'done';
    api.failure = `bad page parameters: ${errors.join('; ')}`;
    showProblem(api.failure);
    hud.update({ status: 'bad parameters' });
    return;
  }
  if (performance.setResourceTimingBufferSize) performance.setResourceTimingBufferSize(100000);

  const { createAdapter } = await ADAPTERS[config.player]();
  let sender = null; // needs the adapter's version; the probe emits nothing before start
  const probe = new QoeProbe({ emit: (event) => sender.push(event) });
  let durationTimer = null;
  let startupTimer = null;
  let failed = null;
  const fail = (message) => {
    if (failed) return;
    failed = message;
    api.failure = message;
    showProblem(message);
    finish('error');
  };
  const adapter = createAdapter({ video, config, probe, fail });

  sender = new EventSender({
    collector: config.collector,
    session: {
      id: config.session,
      player: adapter.name,
      player_version: adapter.version,
      protocol: adapter.protocol,
      manifest: new URL(config.src, location.href).toString(),
      scenario: config.scenario,
      trial: config.trial,
      transport: config.transport,
      user_agent: navigator.userAgent.slice(0, 500),
      started_at: new Date().toISOString(),
    },
    fetch: (url, init) => fetch(url, init),
    storage: window.localStorage,
    beacon: navigator.sendBeacon ? (url, blob) => navigator.sendBeacon(url, blob) : null,
  });

  const view = () => ({
    rendition: probe.rendition,
    bufferAhead: bufferAhead(video),
    lastDownloadRate: probe.lastDownloadRate,
    stallCount: probe.stallCount,
    stallMs: probe.stallMs + (probe.stalled ? performance.now() - probe.stallStartedAt : 0),
    startupMs: probe.startup ? probe.startup.startup_delay_ms : null,
  });

  // --- first frame: requestVideoFrameCallback where there is one, else the playhead moving.
  const firstFrame = (t) => {
    if (probe.started || probe.ended) return;
    probe.firstFrame(t, adapter.rendition() || probe.rendition || {});
    api.state = 'playing';
    hud.update({ ...view(), status: 'playing' });
  };
  if (typeof video.requestVideoFrameCallback === 'function') {
    video.requestVideoFrameCallback((now, meta) => firstFrame(Math.min(now, meta.presentationTime || now)));
  }
  let startPosition = null;
  video.addEventListener('playing', () => {
    if (startPosition === null) startPosition = video.currentTime;
    probe.resumed({ position: video.currentTime });
  });

  // --- stalls: `waiting` with an empty buffer after startup; the watchdog catches silent ones.
  // The end of a stall is the first frame presented past where playback stopped.
  const watchResume = () => {
    if (typeof video.requestVideoFrameCallback !== 'function') return;
    const onFrame = (now, meta) => {
      if (!probe.stalled) return;
      if (!probe.resumed({ position: meta.mediaTime, tMs: Math.min(now, meta.presentationTime || now) })) {
        video.requestVideoFrameCallback(onFrame);
      }
    };
    video.requestVideoFrameCallback(onFrame);
  };
  const maybeStalled = (position) => {
    const stalled = probe.waiting({ position, bufferAhead: bufferAhead(video), seeking: video.seeking, duration: video.duration });
    if (stalled) watchResume();
  };
  let lastPosition = -1;
  let lastMoveAt = performance.now();
  video.addEventListener('waiting', () => maybeStalled(video.currentTime));
  video.addEventListener('timeupdate', () => {
    const t = video.currentTime;
    if (startPosition !== null && t > startPosition + 0.01 && !probe.started) firstFrame(performance.now());
    if (probe.stalled) probe.resumed({ position: t });
  });
  video.addEventListener('ended', () => finish('ended'));
  video.addEventListener('error', () => {
    const err = video.error;
    const message = `media element error ${err ? err.code : ''}: ${err && err.message ? err.message : 'no detail'}`;
    // dash.js resets the Media Source and carries on after a decode error (and reports an
    // ERROR when it gives up); for other players the element's error ends playback.
    const fatal = !adapter.recoversMediaErrors;
    probe.error({ message, fatal, code: err ? `media_${err.code}` : null });
    if (fatal) fail(message);
  });

  const watch = setInterval(() => {
    const now = performance.now();
    const t = video.currentTime;
    if (probe.stalled) probe.resumed({ position: t });
    if (t !== lastPosition) {
      lastPosition = t;
      lastMoveAt = now;
    } else if (!video.paused && !video.seeking && !video.ended && now - lastMoveAt > FROZEN_MS) {
      maybeStalled(t);
    }
  }, WATCH_INTERVAL_MS);

  const sampler = setInterval(() => {
    if (probe.started) {
      probe.sample({ position: video.currentTime, bufferAhead: bufferAhead(video), ...frameCounts(video) });
    }
    hud.update(view());
  }, SAMPLE_INTERVAL_MS);

  // --- the end: duration reached, stream ended, fatal error, or the page closed.
  let finishing = null;
  async function finish(reason) {
    if (finishing) return finishing;
    finishing = (async () => {
      api.state = 'finishing';
      const position = video.currentTime; // before the player is stopped (dash.js resets it)
      clearInterval(watch);
      clearInterval(sampler);
      clearTimeout(durationTimer);
      clearTimeout(startupTimer);
      if (probe.started) probe.sample({ position, bufferAhead: bufferAhead(video), ...frameCounts(video) });
      hud.update({ ...view(), status: reason === 'error' ? 'failed' : 'ended' });
      video.pause();
      try {
        adapter.stop();
      } catch (err) {
        console.warn('stopping the player:', err);
      }
      let endReason = reason;
      if (sender.failures > 0) {
        // The collector has been failing: give it time before the session is declared unreported.
        await sender.drain(DRAIN_TIMEOUT_MS);
        if (sender.pending > 0) {
          probe.error({ message: `collector unreachable at ${config.collector}: ${sender.lastError}`, fatal: true, code: 'collector_unreachable' });
          endReason = 'error';
          api.failure = api.failure || `collector unreachable at ${config.collector}: ${sender.lastError}`;
        }
      }
      probe.end({ reason: endReason, position });
      await sender.drain(sender.failures > 0 ? 2000 : DRAIN_TIMEOUT_MS);
      api.state = 'done';
      return api.report();
    })();
    return finishing;
  }

  api.finish = (reason = 'duration') => finish(reason);
  api.report = () => ({
    state: api.state,
    failure: api.failure,
    session: config.session,
    player: adapter.name,
    player_version: adapter.version,
    started: probe.started,
    startup: probe.startup,
    stall_count: probe.stallCount,
    stall_ms: probe.stallMs,
    segments: probe.segmentCount,
    errors: probe.errors,
    ended: probe.ended,
    position: video.currentTime,
    pending: sender.pending,
    acknowledged: sender.acknowledged,
    next_seq: sender.nextSeq,
    sender_error: sender.lastError,
    rejected: sender.rejected.length,
    codec_support: adapter.codecSupport ? adapter.codecSupport() : {},
  });

  const lastChance = () => {
    if (!probe.ended) probe.end({ reason: 'closed', position: video.currentTime });
    sender.beaconFlush();
  };
  window.addEventListener('pagehide', lastChance);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'hidden') sender.beaconFlush();
  });

  // --- the play request: t=0 of startup delay and of the session's duration.
  api.state = 'starting';
  hud.update({ status: 'starting' });
  probe.playRequested();
  sender.flush();
  if (config.duration) durationTimer = setTimeout(() => finish('duration'), config.duration * 1000);
  startupTimer = setTimeout(() => {
    if (probe.started) return;
    const message = `no frame rendered within ${config.startupTimeout} s of the play request (${config.src})`;
    probe.error({ message, fatal: true, code: 'startup_timeout' });
    fail(message);
  }, config.startupTimeout * 1000);
  video.muted = true;
  try {
    adapter.start();
  } catch (err) {
    probe.error({ message: String(err.message || err), fatal: true, code: 'start' });
    fail(String(err.message || err));
  }
}

run().catch((err) => {
  console.error(err);
  showProblem(`player failed: ${err.message || err}`);
  if (window.mpstream) {
    window.mpstream.state = 'done';
    window.mpstream.failure = `player failed: ${err.message || err}`;
  }
});

// Step 1, load: the page parameters, the player library (only the one asked for is
// downloaded), the QoE probe and the sender that carries its events to the collector.
// Returns the session every later step works on, or null when the parameters are bad.
import { createHud } from '../hud.js';
import { parseParams } from '../probe/params.js';
import { QoeProbe } from '../probe/probe.js';
import { EventSender } from '../probe/sender.js';
import { showProblem } from '../problem.js';
import { failSession, endSession } from './end.js';
import { bufferAhead } from './media.js';

const ADAPTERS = {
  hlsjs: () => import('../adapters/hlsjs.js'),
  dashjs: () => import('../adapters/dashjs.js'),
};

/**
 * `window.mpstream`, what an automated session (player/session.py) follows: `state` goes
 * loading → starting → playing → finishing → done; `finish()` ends the session and resolves
 * to `report()`.
 */
function createControl(config) {
  const control = {
    config,
    state: 'loading',
    failure: null,
    report: () => ({ state: control.state, failure: control.failure }),
    finish: async () => control.report(),
  };
  window.mpstream = control;
  return control;
}

function sessionReport(session) {
  const { control, config, adapter, probe, sender, video } = session;
  return {
    state: control.state,
    failure: control.failure,
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
    // The player library's own loader, or ours in its place (dash.js: adapters/dashjs-xhr.js).
    segment_loader: adapter.segmentLoader ? adapter.segmentLoader() : null,
  };
}

function createSender(config, adapter) {
  return new EventSender({
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
}

export async function loadSession(search) {
  const video = document.getElementById('video');
  const hud = createHud(document.getElementById('hud'));
  const { config, errors } = parseParams(search);
  const control = createControl(config);
  // The transport cell waits for the server's measurement (session/transport.js).
  hud.update({ player: config.player, status: 'loading' });
  if (errors.length) {
    control.state = 'done';
    control.failure = `bad page parameters: ${errors.join('; ')}`;
    showProblem(control.failure);
    hud.update({ status: 'bad parameters' });
    return null;
  }
  if (performance.setResourceTimingBufferSize) performance.setResourceTimingBufferSize(100000);

  const { createAdapter } = await ADAPTERS[config.player]();
  const session = {
    video,
    hud,
    config,
    control,
    adapter: null,
    sender: null, // needs the adapter's version; the probe emits nothing before the play request
    probe: null,
    timers: { duration: null, startup: null, watch: null, sampler: null, transport: null, paths: null },
    failed: null, // the first fatal failure's message
    finishing: null, // the end step's promise, once it has begun
  };
  session.probe = new QoeProbe({ emit: (event) => session.sender.push(event) });
  session.adapter = createAdapter({
    video,
    config,
    probe: session.probe,
    fail: (message) => failSession(session, message),
    bufferAhead: () => bufferAhead(video),
  });
  session.sender = createSender(config, session.adapter);
  control.report = () => sessionReport(session);
  control.finish = (reason = 'duration') => endSession(session, reason);
  return session;
}

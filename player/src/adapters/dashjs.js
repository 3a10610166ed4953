// dash.js → QoE vocabulary. dash.js stamps its requests with wall-clock Dates; where the
// browser's Resource Timing entry of the same request exists, its page-clock times are used
// instead (same clock as everything else, sub-millisecond, true first byte).
import { MediaPlayer } from 'dashjs';
import { configureAbr } from './dashjs-abr.js';
import { dashLiveSettings } from './live.js';
import { perRequestXhrLoader } from './dashjs-xhr.js';
import { codecFamily, codecProblem, ladderOf, pageClock, resourceTiming, stripCmcd } from './common.js';

const E = MediaPlayer.events;
const ERR = MediaPlayer.errors;
// Errors after which there is nothing to play.
const FATAL_CODES = new Set([
  ERR.MANIFEST_LOADER_PARSING_FAILURE_ERROR_CODE,
  ERR.MANIFEST_LOADER_LOADING_FAILURE_ERROR_CODE,
  ERR.CAPABILITY_MEDIASOURCE_ERROR_CODE,
  ERR.DOWNLOAD_ERROR_ID_MANIFEST_CODE,
  ERR.DOWNLOAD_ERROR_ID_INITIALIZATION_CODE,
  ERR.MANIFEST_ERROR_ID_PARSE_CODE,
  ERR.MANIFEST_ERROR_ID_NOSTREAMS_CODE,
  ERR.MEDIASOURCE_TYPE_UNSUPPORTED_CODE,
]);

function mimeOf(rep) {
  if (rep.mimeType) return rep.mimeType;
  const codec = String(rep.codecs || '');
  return /^(mp4a|opus|ac-3|ec-3|flac)/.test(codec) ? 'audio/mp4' : 'video/mp4';
}

/** `type; codecs="…"` of a representation of the MPD (mimeType may sit on its adaptation set). */
export function contentType(rep, adaptationSet = {}) {
  return `${rep.mimeType || adaptationSet.mimeType || mimeOf(rep)}; codecs="${rep.codecs || adaptationSet.codecs}"`;
}

/** Calls fn(representation, adaptationSet) for every representation of the MPD. */
function eachRepresentation(manifest, fn) {
  for (const period of (manifest && manifest.Period) || []) {
    for (const set of period.AdaptationSet || []) {
      for (const rep of set.Representation || []) fn(rep, set);
    }
  }
}

/** Every codec the MPD offers → whether this browser's Media Source can decode it. */
function codecSupport(manifest) {
  const support = {};
  eachRepresentation(manifest, (rep, set) => {
    const codec = rep.codecs || set.codecs;
    if (codec) support[codec] = MediaSource.isTypeSupported(contentType(rep, set));
  });
  return support;
}


function rendition(rep) {
  if (!rep) return null;
  return { bitrate: rep.bandwidth, width: rep.width || null, height: rep.height || null, codec: rep.codecs || null };
}

function kindOf(request) {
  if (request.type === 'InitializationSegment') return 'init';
  if (request.mediaType === 'audio') return 'audio';
  return 'video';
}

export function createAdapter({ video, config, probe, fail, bufferAhead }) {
  const player = MediaPlayer().create();
  // Each request's abort cancels that request, not the loader's latest (dashjs-xhr.js says why).
  // Counted, so that a session's report shows dash.js loaded through it.
  let xhrLoaders = 0;
  player.extend('XHRLoader', () => {
    xhrLoaders += 1;
    return perRequestXhrLoader();
  }, false);
  // dash.js drops representations Media Source cannot decode (the MPD's HEVC set in a browser
  // without an HEVC decoder, so AVC plays); what the browser said is kept for the record.
  let offered = {};
  // codec=avc|hevc: a capabilities filter keeps only that family's video representations (audio
  // and anything else untouched); dash.js applies it to the MPD before choosing what to play.
  const codecOfRep = new Map();
  if (config.codec && config.codec !== 'auto') {
    player.registerCustomCapabilitiesFilter((rep) => {
      const family = codecFamily(rep.codecs || codecOfRep.get(rep.id));
      return family === null || family === config.codec;
    });
  }
  player.updateSettings({
    debug: { logLevel: 2 },
    streaming: {
      cmcd: { enabled: true, sid: config.session, cid: config.src, mode: 'query' },
      ...(config.buffer
        ? { buffer: { bufferTimeDefault: config.buffer, bufferTimeAtTopQuality: config.buffer, bufferTimeAtTopQualityLongForm: config.buffer } }
        : {}),
      ...dashLiveSettings(config),
    },
  });

  // After the settings above: the rule's settings are merged into them.
  const abr = configureAbr(player, { abr: config.abr, params: config.abrParams, bufferTargetS: config.buffer, bufferAhead, probe });

  player.on(E.MANIFEST_LOADED, (e) => {
    offered = codecSupport(e.data);
    eachRepresentation(e.data, (rep, set) => codecOfRep.set(rep.id, rep.codecs || set.codecs));
    const url = new URL(config.src, location.href).toString();
    const timing = resourceTiming(url, probe.playRequestedAt ?? 0);
    const now = performance.now();
    probe.manifestLoaded({
      url,
      t_request: timing ? timing.startTime : probe.playRequestedAt ?? now,
      t_done: timing ? timing.responseEnd : now,
      bytes: timing ? timing.encodedBodySize || timing.transferSize : 0,
    });
    const problem = config.codec && config.codec !== 'auto' ? codecProblem(config.codec, offered) : null;
    if (problem) {
      probe.error({ message: problem, fatal: true, code: 'codec_unsupported' });
      fail(problem);
    }
  });

  // The video representations left after the capability filters (what the browser decodes,
  // the codec family asked for): the ladder dash.js chooses from.
  player.on(E.STREAM_INITIALIZED, () => {
    try {
      probe.ladder(ladderOf(player.getRepresentationsByType('video').map(rendition)));
    } catch {
      // no video: nothing to record
    }
    probe.abr(abr.report());
  });

  player.on(E.FRAGMENT_LOADING_COMPLETED, (e) => {
    const request = e.request;
    if (!request || (request.mediaType !== 'video' && request.mediaType !== 'audio')) return;
    if (e.error || !e.response) return; // failures arrive as ERROR events
    const done = pageClock(request.endDate) ?? performance.now();
    const timing = request.url ? resourceTiming(request.url, done - 1000) : null;
    const rep = request.representation;
    const record = probe.segmentLoaded({
      url: stripCmcd(request.url),
      kind: kindOf(request),
      bitrate: rep ? rep.bandwidth : 0,
      bytes: e.response.byteLength || request.bytesLoaded,
      t_request: timing ? timing.startTime : pageClock(request.startDate),
      t_first_byte: timing ? timing.responseStart : pageClock(request.firstByteDate),
      t_done: timing ? timing.responseEnd : done,
      index: request.type === 'InitializationSegment' || !Number.isFinite(request.index) ? null : request.index,
      duration_s: request.type === 'InitializationSegment' ? null : request.duration,
    });
    if (abr.engine) abr.engine.downloaded(record);
  });

  player.on(E.QUALITY_CHANGE_RENDERED, (e) => {
    if (e.mediaType !== 'video') return;
    const r = rendition(e.newRepresentation);
    if (r) probe.renditionRendered(r);
  });

  player.on(E.ERROR, (e) => {
    const err = e.error || {};
    // Codes 1-5 are the media element's own (MEDIA_ERR_*), reported once dash.js gave up.
    const fatal = FATAL_CODES.has(err.code) || (err.code >= 1 && err.code <= 5);
    const message = err.message || `dash.js error ${err.code}`;
    probe.error({ message, fatal, code: err.code === undefined || err.code === null ? null : String(err.code) });
    if (fatal) fail(message);
  });

  return {
    name: 'dashjs',
    abrEngine: abr.engine, // a rule of ours, or null (session/paths.js feeds it the paths)
    protocol: 'dash',
    version: player.getVersion(),
    codecSupport: () => offered,
    segmentLoader: () => ({ xhr: 'per-request', instances: xhrLoaders }),
    recoversMediaErrors: true,
    start() {
      player.initialize(video, config.src, true);
    },
    rendition() {
      try {
        return rendition(player.getCurrentRepresentationForType('video'));
      } catch {
        return null;
      }
    },
    /** Latency to live (s) as dash.js measures it: the server's wall clock (UTCTiming) minus
     * the wall-clock time of the frame at the playhead. null for a static MPD. */
    liveLatency() {
      try {
        if (!player.isDynamic()) return null;
        const latency = player.getCurrentLiveLatency();
        if (!Number.isFinite(latency)) return null;
        const target = player.getTargetLiveDelay();
        return { latency_s: latency, target_s: Number.isFinite(target) ? target : null, playback_rate: video.playbackRate };
      } catch {
        return null;
      }
    },
    // Stops the network; the player is reset.
    stop() {
      player.reset();
    },
  };
}

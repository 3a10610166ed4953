// hls.js → QoE vocabulary. hls.js keeps its request timings on each loader's stats object
// (loading.start / first / end on the page clock), so they are used as they are.
import Hls from 'hls.js';
import { codecFamily, codecProblem, ladderOf, stripCmcd } from './common.js';
import { abrConfig } from './hlsjs-abr.js';
import { partKeepingLoader } from './hlsjs-loader.js';
import { catchupBufferFloor, catchupRate, hlsCatchup, hlsLiveSettings } from './live.js';

// Not errors of the session: hls.js reports the first three while it works around a stall
// (the probe records stalls itself from the media element), and `aborted` when its own ABR
// abandons a download to switch down.
const NOT_SESSION_ERRORS = new Set([
  Hls.ErrorDetails.BUFFER_STALLED_ERROR,
  Hls.ErrorDetails.BUFFER_NUDGE_ON_STALL,
  Hls.ErrorDetails.BUFFER_SEEK_OVER_HOLE,
  Hls.ErrorDetails.INTERNAL_ABORTED,
]);

function levelRendition(level) {
  if (!level) return null;
  return {
    bitrate: level.bitrate,
    width: level.width || null,
    height: level.height || null,
    codec: level.videoCodec || level.codecSet || null,
  };
}

export function createAdapter({ video, config, probe, fail, bufferAhead }) {
  if (!Hls.isSupported()) {
    throw new Error('this browser has no Media Source Extensions: hls.js cannot play here');
  }
  const abr = abrConfig({ abr: config.abr, params: config.abrParams, bufferTargetS: config.buffer, bufferAhead, probe });
  let detachedParts = 0;
  const hls = new Hls({
    ...abr.config,
    // Parts hls.js abandons finish on their own and keep their connection (hlsjs-loader.js).
    fLoader: partKeepingLoader(Hls.DefaultConfig.loader, () => { detachedParts += 1; }),
    // CMCD as query arguments: no CORS preflight, and nginx's access log carries it.
    cmcd: { sessionId: config.session, contentId: config.src, useHeaders: false },
    enableWorker: true,
    capLevelToPlayerSize: false,
    ...(config.buffer ? { maxBufferLength: config.buffer, maxMaxBufferLength: config.buffer } : {}),
    ...hlsLiveSettings(config),
  });
  let mediaRecoveries = 0;

  // The page holds the live target (live.js says why hls.js's own controller is off): the
  // page's, as dash.js does, where hls.js would sit a second further back after each stall
  // (its liveSyncOnStallIncrease); without one, hls.js's (the playlist's PART-HOLD-BACK). The
  // latency is the one hls.js computed at the previous tick of the media clock.
  const catchup = hlsCatchup(config);
  const heldTarget = () => config.targetLatency || hls.targetLatency;
  const holdTarget = () => {
    const details = hls.latestLevelDetails;
    const target = heldTarget();
    if (!details || !details.live || video.paused || !(hls.latency > 0) || !target) return;
    const ends = video.buffered;
    const ahead = ends.length ? ends.end(ends.length - 1) - video.currentTime : 0;
    const rate = catchupRate({ latency: hls.latency, target, ahead, floor: catchupBufferFloor(details), ...catchup });
    if (video.playbackRate !== rate) video.playbackRate = rate;
  };

  const manifestLoaded = (url, stats) => {
    probe.manifestLoaded({ url: stripCmcd(url), t_request: stats.loading.start, t_done: stats.loading.end, bytes: stats.loaded });
  };
  hls.on(Hls.Events.MANIFEST_LOADED, (_e, data) => manifestLoaded(data.url, data.stats));
  // codec=avc|hevc: only that family's levels stay (the HLS tree is AVC in MPEG-TS); false when
  // that family cannot play here (the session fails).
  const keepCodecFamily = () => {
    if (!config.codec || config.codec === 'auto') return true;
    const support = {};
    for (const level of hls.levels) {
      if (level.videoCodec) support[level.videoCodec] = MediaSource.isTypeSupported(`video/mp4; codecs="${level.videoCodec}"`);
    }
    const problem = codecProblem(config.codec, support, 'HLS master playlist');
    if (problem) {
      probe.error({ message: problem, fatal: true, code: 'codec_unsupported' });
      fail(problem);
      return false;
    }
    for (let i = hls.levels.length - 1; i >= 0; i -= 1) {
      const family = codecFamily(hls.levels[i].videoCodec);
      if (family !== null && family !== config.codec) hls.removeLevel(i);
    }
    return true;
  };
  // The levels left: the ladder hls.js chooses from.
  hls.on(Hls.Events.MANIFEST_PARSED, () => {
    if (keepCodecFamily()) probe.ladder(ladderOf(hls.levels.map(levelRendition)));
    probe.abr(abr.report(hls));
  });
  hls.on(Hls.Events.LEVEL_LOADED, (_e, data) => manifestLoaded(data.details.url, data.stats));
  hls.on(Hls.Events.AUDIO_TRACK_LOADED, (_e, data) => manifestLoaded(data.details.url, data.stats));

  hls.on(Hls.Events.FRAG_LOADED, (_e, { frag, part }) => {
    const stats = (part || frag).stats;
    let kind;
    let bitrate = 0;
    if (frag.sn === 'initSegment') {
      kind = 'init';
    } else if (frag.type === 'audio') {
      kind = 'audio';
    } else {
      // Without separate audio renditions the main playlist's segments carry both.
      kind = hls.audioTracks.some((track) => track.url) ? 'video' : 'muxed';
    }
    if (frag.type === 'main' && hls.levels[frag.level]) bitrate = hls.levels[frag.level].bitrate;
    else if (frag.type === 'audio' && hls.audioTracks[frag.level]) bitrate = hls.audioTracks[frag.level].bitrate || 0;
    // Low-latency HLS loads a segment part by part: each part is a download of its own (the
    // segment being written has no URI of its own yet).
    const record = probe.segmentLoaded({
      url: stripCmcd((part || frag).url),
      kind,
      bitrate,
      bytes: stats.loaded || stats.total,
      t_request: stats.loading.start,
      t_first_byte: stats.loading.first,
      t_done: stats.loading.end,
      index: typeof frag.sn === 'number' ? frag.sn : null,
      part: part ? part.index : null,
      duration_s: frag.sn === 'initSegment' ? null : (part || frag).duration,
    });
    if (abr.engine) abr.engine.downloaded(record);
  });

  // FRAG_CHANGED: the fragment at the playhead changed, i.e. what is on screen.
  hls.on(Hls.Events.FRAG_CHANGED, (_e, { frag }) => {
    if (frag.type !== 'main') return;
    const rendition = levelRendition(hls.levels[frag.level]);
    if (rendition) probe.renditionRendered(rendition);
  });

  hls.on(Hls.Events.ERROR, (_e, data) => {
    if (!data.fatal && NOT_SESSION_ERRORS.has(data.details)) return;
    const status = data.response && data.response.code;
    const message = [data.details, data.error && data.error.message, status ? `HTTP ${status}` : null, data.url || (data.frag && data.frag.url) || (data.context && data.context.url)]
      .filter(Boolean)
      .join(': ');
    if (data.fatal && data.type === Hls.ErrorTypes.MEDIA_ERROR && mediaRecoveries < 1) {
      // One recovery attempt, as hls.js recommends, before the session is given up.
      mediaRecoveries += 1;
      probe.error({ message, fatal: false, code: data.details });
      hls.recoverMediaError();
      return;
    }
    probe.error({ message, fatal: data.fatal, code: data.details });
    if (data.fatal) fail(message);
  });

  return {
    name: 'hlsjs',
    abrEngine: abr.engine, // a rule of ours, or null (session/paths.js feeds it the paths)
    protocol: 'hls',
    version: Hls.version,
    segmentLoader: () => ({ xhr: 'parts finish when abandoned', detached_parts: detachedParts }),
    start() {
      if (catchup) video.addEventListener('timeupdate', holdTarget);
      hls.attachMedia(video);
      hls.loadSource(config.src);
    },
    rendition() {
      const level = hls.currentLevel >= 0 ? hls.currentLevel : hls.loadLevel;
      return levelRendition(hls.levels[level]);
    },
    /** Latency to live (s) as hls.js measures it: the live edge of the playlist minus the
     * playhead. null for on-demand media or before the first playlist. */
    liveLatency() {
      const details = hls.latestLevelDetails || (hls.levels[hls.currentLevel] || {}).details;
      if (!details || !details.live || !Number.isFinite(hls.latency)) return null;
      return { latency_s: hls.latency, target_s: heldTarget() ?? null, playback_rate: video.playbackRate };
    },
    // Stops the network; the last frame stays on screen.
    stop() {
      video.removeEventListener('timeupdate', holdTarget);
      hls.stopLoad();
    },
  };
}

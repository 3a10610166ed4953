// The QoE probe: turns what a player adapter observes into the shared event vocabulary of
// docs/qoe-events.md. It knows nothing about hls.js or dash.js (the adapters translate their
// library's events into the calls below) and nothing about the network (the sender does).
// Times are page-clock milliseconds (performance.now()).

// Playback that halts with less than this much media ahead of the playhead has an empty buffer:
// players stop a little before the very end of what is buffered.
export const EMPTY_BUFFER_S = 0.5;
// A `waiting` this close to the end of the presentation is the end, not a stall.
export const END_MARGIN_S = 0.5;
// A stall is over when the playhead has moved past where it stopped by at least this much
// (one frame at 25 fps): a `playing` event or a tiny nudge of currentTime is not playback.
export const RESUME_ADVANCE_S = 0.04;

const MEDIA_KINDS = new Set(['video', 'muxed']);

function rounded(value, digits = 3) {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

export class QoeProbe {
  /**
   * @param {object} options
   * @param {(event: {t_ms: number, type: string, data: object}) => void} options.emit
   *   receives each record; the sender numbers and delivers it.
   * @param {() => number} [options.now] page clock in ms.
   */
  constructor({ emit, now = () => performance.now() }) {
    this.emit = emit;
    this.now = now;
    this.playRequestedAt = null;
    this.manifests = [];
    this.firstMediaSegment = null;
    this.startup = null;
    this.stallStartedAt = null;
    this.stallPosition = null;
    this.stallCount = 0;
    this.stallMs = 0;
    this.rendition = null;
    this.lastSegment = null;
    this.segmentCount = 0;
    this.errors = [];
    this.ended = null;
    this.lastLiveLatency = null;
    this.ladderSent = false;
    this.representations = [];
    this.abrReported = null;
    this.abrDecisions = 0;
  }

  record(type, data, tMs = this.now()) {
    this.emit({ t_ms: rounded(Math.max(0, tMs)), type, data });
  }

  get started() {
    return this.startup !== null;
  }

  get stalled() {
    return this.stallStartedAt !== null;
  }

  /** The play request: t=0 of the startup delay. */
  playRequested() {
    this.playRequestedAt = this.now();
    return this.playRequestedAt;
  }

  manifestLoaded({ url, t_request, t_done, bytes }) {
    if (this.ended) return;
    const record = { url, t_request: rounded(t_request), t_done: rounded(t_done), bytes: Math.round(bytes || 0) };
    this.manifests.push(record);
    this.record('manifest', record, t_done);
  }

  segmentLoaded(segment) {
    if (this.ended) return;
    const record = {
      url: segment.url,
      kind: segment.kind,
      bitrate: Math.round(segment.bitrate || 0),
      bytes: Math.round(segment.bytes || 0),
      t_request: rounded(segment.t_request),
      t_first_byte: rounded(Math.max(segment.t_first_byte, segment.t_request)),
      t_done: rounded(Math.max(segment.t_done, segment.t_first_byte, segment.t_request)),
      index: Number.isInteger(segment.index) ? segment.index : null,
      duration_s: Number.isFinite(segment.duration_s) ? rounded(segment.duration_s) : null,
      // a low-latency part of segment `index` (LL-HLS), only then
      ...(Number.isInteger(segment.part) ? { part: segment.part } : {}),
    };
    if (this.firstMediaSegment === null && MEDIA_KINDS.has(record.kind)) {
      this.firstMediaSegment = record;
    }
    this.lastSegment = record;
    this.segmentCount += 1;
    this.record('segment', record, record.t_done);
    return record;
  }

  /** Download rate of the last segment in bit/s (HUD). */
  get lastDownloadRate() {
    const s = this.lastSegment;
    if (!s || s.t_done <= s.t_request) return null;
    return (s.bytes * 8) / ((s.t_done - s.t_request) / 1000);
  }

  /**
   * First frame rendered. Startup delay is split into manifest time (play request → the last
   * manifest needed before the first media segment was requested), first segment time (→ that
   * segment fully downloaded) and decode time (→ the frame on screen); the three add up.
   * The boundaries come from different clocks of the browser (Resource Timing's responseEnd,
   * the compositor's presentation time), which can disagree by a millisecond or so: each
   * boundary is placed within [play request, first frame] and after the one before it, so a
   * frame stamped just before its segment's responseEnd gives a decode time of 0, not a sum
   * larger than the startup delay.
   */
  firstFrame(tMs, rendition) {
    if (this.started || this.ended || this.playRequestedAt === null) return;
    const t0 = this.playRequestedAt;
    const end = Math.max(t0, tMs);
    const within = (t, from) => (t === null || !Number.isFinite(t) ? null : Math.min(end, Math.max(from, t)));
    const seg = this.firstMediaSegment;
    const before = seg ? this.manifests.filter((m) => m.t_done <= seg.t_request) : this.manifests;
    const manifestDone = within(before.length ? Math.max(...before.map((m) => m.t_done)) : null, t0);
    const segmentDone = within(seg ? seg.t_done : null, manifestDone ?? t0);
    const manifestMs = manifestDone === null ? null : manifestDone - t0;
    const firstSegmentMs = segmentDone === null ? null : segmentDone - (manifestDone ?? t0);
    const decodeMs = end - (segmentDone ?? manifestDone ?? t0);
    rendition = this.renditionOf(seg, rendition) || rendition;
    this.rendition = { ...rendition };
    this.startup = {
      startup_delay_ms: rounded(end - t0),
      // A phase the player gave no timing for counts as 0 (the collector wants numbers).
      manifest_ms: rounded(manifestMs ?? 0),
      first_segment_ms: rounded(firstSegmentMs ?? 0),
      decode_ms: rounded(decodeMs ?? 0),
      codec: rendition.codec || '',
      width: rendition.width || 0,
      height: rendition.height || 0,
      bitrate: Math.round(rendition.bitrate || 0),
    };
    this.record('startup', this.startup, tMs);
  }

  /**
   * The rung of the ladder a media segment was loaded from (null when unknown). The first frame
   * is the first media segment's: a player asked what it is showing may answer with what it is
   * downloading (dash.js's current representation moves on as soon as the next segment is
   * requested; runs saw a 10.5 Mbit/s startup reported for a first frame from 1.3 Mbit/s).
   * Of rungs of equal bitrate, the one of `hint`'s codec.
   */
  renditionOf(segment, hint = {}) {
    if (!segment || !segment.bitrate) return null;
    const same = this.representations.filter((r) => r.bitrate === segment.bitrate);
    return same.find((r) => r.codec === hint.codec) || same[0] || null;
  }

  /**
   * The media element is waiting for data. Only after startup, with an empty buffer, not while
   * seeking and not at the end of the presentation, is that a stall.
   */
  waiting({ position, bufferAhead, seeking = false, duration = Infinity }) {
    if (!this.started || this.stalled || this.ended || seeking) return false;
    if (bufferAhead >= EMPTY_BUFFER_S) return false;
    if (Number.isFinite(duration) && position >= duration - END_MARGIN_S) return false;
    this.stallStartedAt = this.now();
    this.stallPosition = position;
    this.stallCount += 1;
    this.record('stall_start', { position: rounded(position) }, this.stallStartedAt);
    return true;
  }

  /**
   * The playhead is at `position` (at page time `tMs`, default now): if it has moved on from
   * where a stall stopped it, the stall is over. `force` ends it regardless (the session ends).
   */
  resumed({ position, tMs = this.now(), force = false }) {
    if (!this.stalled) return false;
    if (!force && !(position >= this.stallPosition + RESUME_ADVANCE_S)) return false;
    const t = Math.max(tMs, this.stallStartedAt);
    const durationMs = t - this.stallStartedAt;
    this.stallStartedAt = null;
    this.stallPosition = null;
    this.stallMs += durationMs;
    this.record('stall_end', { position: rounded(position), duration_ms: rounded(durationMs) }, t);
    return true;
  }

  /** The video representations the player may choose from (adapters' `ladderOf`), sent once. */
  ladder(representations) {
    if (this.ended || this.ladderSent || !representations.length) return;
    this.ladderSent = true;
    this.representations = representations;
    this.record('ladder', { representations: representations.slice(0, 64) });
  }

  /** The adaptation rule the player says it runs, read back after configuration; sent once. */
  abr({ name, player_rules = [], params = {} }) {
    if (this.ended || this.abrReported) return;
    const numeric = Object.entries(params).filter(([, v]) => typeof v === 'number' && Number.isFinite(v));
    this.abrReported = {
      name: String(name).slice(0, 40),
      player_rules: player_rules.slice(0, 16).map((r) => String(r).slice(0, 100)),
      params: Object.fromEntries(numeric.slice(0, 16)),
    };
    this.record('abr', this.abrReported);
  }

  /** One decision of a rule of ours (abr/engine.js), with the inputs that made it. */
  abrDecision(data) {
    if (this.ended) return;
    this.abrDecisions += 1;
    this.record('abr_decision', data);
  }

  /** A rendition is now on screen; after startup a change of bitrate is a quality switch. */
  renditionRendered(rendition) {
    if (this.ended) return;
    if (!this.started) {
      this.rendition = { ...rendition };
      return;
    }
    const previous = this.rendition;
    if (previous && previous.bitrate === rendition.bitrate && previous.codec === rendition.codec) return;
    this.rendition = { ...rendition };
    this.record('quality_switch', {
      from_bitrate: Math.round(previous ? previous.bitrate || 0 : 0),
      to_bitrate: Math.round(rendition.bitrate || 0),
      width: rendition.width || 0,
      height: rendition.height || 0,
      codec: rendition.codec || '',
    });
  }

  /** Once a second: buffer level and frame counters. */
  sample({ position, bufferAhead, droppedFrames, totalFrames }) {
    if (this.ended) return;
    const t = this.now();
    this.record('buffer', { level_s: rounded(Math.max(0, bufferAhead)), position: rounded(position) }, t);
    this.record('playback', {
      position: rounded(position),
      dropped_frames: Math.round(droppedFrames || 0),
      total_frames: Math.round(totalFrames || 0),
    }, t);
  }

  /** Once a second on a live stream: how far behind the live edge the playhead is. */
  liveLatency({ latency_s, target_s = null, playback_rate = 1 }) {
    if (this.ended || !Number.isFinite(latency_s)) return;
    this.lastLiveLatency = {
      latency_s: rounded(Math.max(0, latency_s)),
      target_s: Number.isFinite(target_s) ? rounded(Math.max(0, target_s)) : null,
      playback_rate: rounded(Number.isFinite(playback_rate) ? playback_rate : 1),
    };
    this.record('live_latency', this.lastLiveLatency);
  }

  error({ message, fatal, code = null }) {
    if (this.ended) return;
    const record = { message: String(message).slice(0, 2000), fatal: Boolean(fatal), code: code === null ? null : String(code) };
    this.errors.push(record);
    this.record('error', record);
  }

  /** The last record of a session; a stall still open is closed first so its time counts. */
  end({ reason, position }) {
    if (this.ended) return false;
    this.resumed({ position, force: true });
    this.ended = { reason, position: rounded(position) };
    this.record('end', this.ended);
    return true;
  }
}

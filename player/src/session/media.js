// What the media element says about playback now: seconds buffered ahead of the playhead,
// frame counts, and the figures the HUD shows.

export function bufferAhead(video) {
  const t = video.currentTime;
  const ranges = video.buffered;
  for (let i = 0; i < ranges.length; i += 1) {
    // A small tolerance: the playhead may sit just before a range that starts at a gap.
    if (ranges.start(i) - 0.1 <= t && t < ranges.end(i)) return ranges.end(i) - t;
  }
  return 0;
}

export function frameCounts(video) {
  if (typeof video.getVideoPlaybackQuality === 'function') {
    const q = video.getVideoPlaybackQuality();
    return { droppedFrames: q.droppedVideoFrames, totalFrames: q.totalVideoFrames };
  }
  return { droppedFrames: video.webkitDroppedFrameCount || 0, totalFrames: video.webkitDecodedFrameCount || 0 };
}

/** A probe sample's fields at the playhead's current position. */
export function playbackSample(video) {
  return { position: video.currentTime, bufferAhead: bufferAhead(video), ...frameCounts(video) };
}

/** The HUD's view of the session: rendition, buffer, last download rate, stalls, startup,
 * latency to live. */
export function hudView({ video, probe }) {
  return {
    liveLatency: probe.lastLiveLatency,
    rendition: probe.rendition,
    bufferAhead: bufferAhead(video),
    lastDownloadRate: probe.lastDownloadRate,
    stallCount: probe.stallCount,
    stallMs: probe.stallMs + (probe.stalled ? performance.now() - probe.stallStartedAt : 0),
    startupMs: probe.startup ? probe.startup.startup_delay_ms : null,
  };
}

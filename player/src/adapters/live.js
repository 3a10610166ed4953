// A live stream's settings for each library, from the page's target latency and catch-up
// parameters (player/livesync.py says what each means; null: the defaults here).

export const DEFAULT_MAX_RATE = 1.25;
export const DEFAULT_MIN_RATE = 0.75;

/**
 * hls.js: play `targetLatency` s behind the edge; drift beyond it is caught up by playing
 * faster (up to `catchupMaxRate`), and beyond `maxDrift` past the target (by default the
 * target plus 2 s) by a jump. hls.js never plays slower to fall back.
 */
export function hlsLiveSettings({ targetLatency, catchupMaxRate, maxDrift }) {
  const rate = catchupMaxRate ?? (targetLatency ? DEFAULT_MAX_RATE : null);
  return {
    ...(targetLatency
      ? { liveSyncDuration: targetLatency, liveMaxLatencyDuration: targetLatency + (maxDrift ?? targetLatency + 2) }
      : {}),
    ...(rate ? { maxLiveSyncPlaybackRate: rate } : {}),
  };
}

/**
 * dash.js (under `streaming`): play `targetLatency` s behind the edge (against the server's
 * clock, from the MPD's UTCTiming), catching up by playing up to `catchupMaxRate` or down to
 * `catchupMinRate` when too close, and jumping to the edge `maxDrift` s past the target (by
 * default twice the target plus 2 s).
 */
export function dashLiveSettings({ targetLatency, catchupMaxRate, catchupMinRate, maxDrift }) {
  const catchup = targetLatency || catchupMaxRate || catchupMinRate || maxDrift;
  const drift = maxDrift ?? (targetLatency ? targetLatency * 2 + 2 : null);
  return {
    ...(targetLatency ? { delay: { liveDelay: targetLatency, useSuggestedPresentationDelay: false } } : {}),
    ...(catchup
      ? {
          liveCatchup: {
            enabled: true,
            ...(drift ? { maxDrift: drift } : {}),
            playbackRate: { min: (catchupMinRate ?? DEFAULT_MIN_RATE) - 1, max: (catchupMaxRate ?? DEFAULT_MAX_RATE) - 1 },
          },
        }
      : {}),
  };
}

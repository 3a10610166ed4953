// A live stream's settings for each library, from the page's target latency and catch-up
// parameters (player/livesync.py says what each means; null: the defaults here), and the
// page's own catch-up for hls.js.

export const DEFAULT_MAX_RATE = 1.25;
export const DEFAULT_MIN_RATE = 0.75;

/**
 * hls.js: play `targetLatency` s behind the edge, and beyond `maxDrift` past the target (by
 * default the target plus 2 s) jump. hls.js's own latency controller is off
 * (`maxLiveSyncPlaybackRate` 1): it speeds up only while more than a second is buffered
 * ahead, which a target of about a second never has, so the page holds the target instead
 * (`hlsCatchup`).
 */
export function hlsLiveSettings({ targetLatency, maxDrift }) {
  if (!targetLatency) return {};
  return {
    liveSyncDuration: targetLatency,
    liveMaxLatencyDuration: targetLatency + (maxDrift ?? targetLatency + 2),
    maxLiveSyncPlaybackRate: 1,
  };
}

// Within this distance of the target the rate stays 1 (hls.js's and dash.js's own margin).
export const CATCHUP_DEADBAND_S = 0.05;
// The distance from the target at which the rate has gone tanh(1), 76%, of the way to its
// limit: a quarter second behind plays at about 1.19x under the 1.25x default.
export const CATCHUP_SCALE_S = 0.25;

/**
 * The page's catch-up for hls.js, toward hls.js's target (the page's, or without one the
 * playlist's PART-HOLD-BACK): the rates it may play at, or null when no live parameter asks
 * for it (hls.js's default: no catch-up).
 */
export function hlsCatchup({ targetLatency, catchupMaxRate, catchupMinRate }) {
  if (!targetLatency && !catchupMaxRate && !catchupMinRate) return null;
  return { maxRate: catchupMaxRate ?? DEFAULT_MAX_RATE, minRate: catchupMinRate ?? DEFAULT_MIN_RATE };
}

/**
 * How much must be buffered ahead for the page to play faster: a part in flight and one to
 * spare (two part targets), at most the second hls.js's own controller asks.
 */
export function catchupBufferFloor({ partTarget, targetduration }) {
  return Math.min(1, 2 * (partTarget || targetduration || 0.5));
}

/**
 * The playback rate that brings `latency` back to `target`: faster while behind, if more than
 * `floor` s is buffered ahead (playing faster spends buffer); slower while ahead of it, which
 * builds buffer. Smooth in the distance, to a hundredth.
 */
export function catchupRate({ latency, target, ahead, floor, maxRate, minRate }) {
  const distance = latency - target;
  let rate = 1;
  if (distance > CATCHUP_DEADBAND_S && ahead > floor) {
    rate = 1 + (maxRate - 1) * Math.tanh(distance / CATCHUP_SCALE_S);
  } else if (distance < -CATCHUP_DEADBAND_S) {
    rate = 1 - (1 - minRate) * Math.tanh(-distance / CATCHUP_SCALE_S);
  }
  return Math.round(rate * 100) / 100;
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

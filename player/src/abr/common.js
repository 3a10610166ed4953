// What the adaptation rules share: checking their inputs and measuring past downloads.
// Nothing here touches a player or a browser API, so the page bundle and node's tests import the
// same code (docs/abr.md).

// A player's buffer target when it is not set: hls.js's maxBufferLength and dash.js's
// bufferTimeAtTopQuality both default to 30 s.
export const DEFAULT_BUFFER_TARGET_S = 30;

// How many recent downloads the throughput estimates look at (the last five segments, as in the
// rate-based and RobustMPC rules of Yin et al., SIGCOMM 2015).
export const DEFAULT_WINDOW = 5;

// A ladder is the rungs a rule may pick from, lowest bitrate first: [{ bitrate (bit/s), ... }].
// Equal neighbours are allowed (the same bitrate in two codecs); a descending pair is a caller's
// mistake that would make every "highest rung below" answer wrong, so it is refused.
export function checkLadder(ladder) {
  if (!Array.isArray(ladder) || ladder.length === 0) {
    throw new TypeError('ladder: must be a non-empty list of rungs ({ bitrate } in bit/s)');
  }
  ladder.forEach((rung, i) => {
    const bitrate = rung?.bitrate;
    if (typeof bitrate !== 'number' || !Number.isFinite(bitrate) || bitrate <= 0) {
      throw new RangeError(`ladder[${i}].bitrate: must be a positive number of bit/s, got ${bitrate}`);
    }
    if (i > 0 && bitrate < ladder[i - 1].bitrate) {
      throw new RangeError(`ladder[${i}].bitrate: the ladder must be sorted lowest bitrate first`);
    }
  });
}

export function checkSeconds(name, value, { positive = false } = {}) {
  const ok = typeof value === 'number' && Number.isFinite(value) && (positive ? value > 0 : value >= 0);
  if (!ok) throw new RangeError(`${name}: must be a ${positive ? 'positive' : 'non-negative'} number of seconds, got ${value}`);
}

export function checkIndex(name, value, ladder) {
  if (!Number.isInteger(value) || value < 0 || value >= ladder.length) {
    throw new RangeError(`${name}: must be a rung index from 0 to ${ladder.length - 1}, got ${value}`);
  }
}

// Download rate of one past segment in bit/s: bytes × 8 / (t_done − t_request), the definition of
// docs/qoe.md. A download is described either by its duration (durationMs) or by the probe's
// segment times (t_request, t_done, in ms). One that cannot give a rate (no bytes, no time: a
// cached or aborted response) gives null and is left out of every estimate.
export function throughputBps(download) {
  const bytes = download?.bytes;
  const ms = download?.durationMs ?? (download?.t_done - download?.t_request);
  if (!(bytes > 0) || !(ms > 0) || !Number.isFinite(bytes) || !Number.isFinite(ms)) return null;
  return (bytes * 8 * 1000) / ms;
}

// The last `window` downloads that give a rate, oldest first, each as { bps, download }.
export function recentDownloads(past, window = DEFAULT_WINDOW) {
  if (past == null) return [];
  if (!Array.isArray(past)) throw new TypeError('past: must be a list of downloads, most recent last');
  if (!Number.isInteger(window) || window < 1) throw new RangeError(`window: must be a positive integer, got ${window}`);
  const usable = [];
  for (const download of past) {
    const bps = throughputBps(download);
    if (bps !== null) usable.push({ bps, download });
  }
  return usable.slice(-window);
}

// n / Σ 1/x: dominated by the slow samples, so one lucky burst does not lift the estimate much
// (the estimator of Jiang, Sekar and Zhang, FESTIVE, CoNEXT 2012). null when there is nothing to
// average.
export function harmonicMean(values) {
  if (values.length === 0) return null;
  return values.length / values.reduce((sum, v) => sum + 1 / v, 0);
}

// The highest rung whose bitrate is at most `bps`; the lowest rung when none is.
export function highestAtMost(ladder, bps) {
  let index = 0;
  ladder.forEach((rung, i) => {
    if (rung.bitrate <= bps) index = i;
  });
  return index;
}

// A recorded decision's inputs (an `abr_decision` event's, engine.js) as the rules take them:
// the ladder's rungs, and each past download with the prediction made for it, if any.
export function recordedLadder(inputs) {
  return inputs.ladder_bps.map((bitrate) => ({ bitrate }));
}

export function recordedPast(inputs) {
  return inputs.past.map((d) => ({ bytes: d.bytes, t_request: d.t_request, t_done: d.t_done, ...(d.predicted_bps > 0 ? { predictedBps: d.predicted_bps } : {}) }));
}

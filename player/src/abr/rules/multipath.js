// The multipath-aware rule: the rung the paths free of a path policy can carry, as the transport
// measures each path (the server's per-path delivery rate, abr/paths.js), not as one download's
// duration says. Over MPTCP a short download measures slow (its first bytes wait for the slower
// path; docs/penalties/startup.md), so a rule led by download rates holds the rung down, and it
// cannot tell a path a policy holds back (a metered cellular path) from one it may use. See
// docs/abr.md#multipath.
import {
  checkLadder, checkSeconds, DEFAULT_BUFFER_TARGET_S, harmonicMean, highestAtMost, recentDownloads,
  recordedLadder, recordedPast,
} from '../common.js';

// The share of the estimate the chosen rung may take once the buffer is past its reservoir:
// room for the estimate's error and the audio beside the video.
export const DEFAULT_SAFETY = 0.85;

// Input: { ladder, bufferS, segmentS, past (downloads), paths ([{ address, bps, held, spared,
// live }] or null when the transport's paths are not measured), bufferTargetS, safety,
// reservoirS }.
//
// The estimate is the sum of the rates of the live paths the path policy neither holds back now
// nor spares: a spared path (metered, under `backup` or `deadline`) serves the buffer when the
// policy lets it, never the rung, so the player does not come to need it; a held one (the
// slower path under `handover`, or before the first frame under `fast-start`) counts once the
// policy lets it carry data. Without path figures it is the harmonic mean of the last five
// download rates (the rate-based rule). Below the reservoir
// (two segments, or a quarter of the buffer target if less) the rung is chosen against the lower
// of the paths' estimate and the downloads' and with half the room at an empty buffer, rising
// to `safety` at the reservoir: a rung that stalls costs more than one that is low a while.
export function multipath({ ladder, bufferS, segmentS, past = [], paths = null,
  bufferTargetS = DEFAULT_BUFFER_TARGET_S, safety = DEFAULT_SAFETY, reservoirS = null }) {
  checkLadder(ladder);
  checkSeconds('bufferS', bufferS);
  checkSeconds('segmentS', segmentS, { positive: true });
  checkSeconds('bufferTargetS', bufferTargetS, { positive: true });
  if (!(safety > 0 && safety <= 1)) throw new RangeError(`safety: must be in (0, 1], got ${safety}`);
  if (paths !== null && !Array.isArray(paths)) throw new TypeError('paths: must be a list of path figures or null');
  const reservoir = reservoirS ?? Math.min(2 * segmentS, bufferTargetS / 4);
  checkSeconds('reservoirS', reservoir);

  const downloadsBps = harmonicMean(recentDownloads(past).map((d) => d.bps));
  const measured = paths !== null && paths.length > 0;
  const free = measured ? paths.filter((p) => p.live && !p.held && !p.spared) : [];
  const freeBps = free.reduce((sum, p) => sum + p.bps, 0);
  const heldBps = measured ? paths.filter((p) => p.live && (p.held || p.spared)).reduce((sum, p) => sum + p.bps, 0) : 0;
  let estimateBps = measured ? freeBps : downloadsBps;
  let room = safety;
  if (bufferS < reservoir) {
    if (measured && downloadsBps !== null) estimateBps = Math.min(freeBps, downloadsBps);
    room = safety * (0.5 + (0.5 * bufferS) / reservoir); // bufferS < reservoir: not 0
  }
  const index = estimateBps === null ? 0 : highestAtMost(ladder, room * estimateBps);
  return {
    rule: 'multipath',
    index,
    bitrate: ladder[index].bitrate,
    estimateBps,
    source: measured ? 'paths' : 'downloads',
    freeBps: measured ? freeBps : null,
    heldBps: measured ? heldBps : null,
    downloadsBps,
    room,
    reservoirS: reservoir,
  };
}

// A session's decision (engine.js) from its recorded inputs and the rule's parameters
// (catalog.json: safety, reservoirS; and the player's bufferTargetS).
export function decide(inputs, params) {
  return multipath({
    ladder: recordedLadder(inputs),
    bufferS: inputs.buffer_s,
    segmentS: inputs.segment_s,
    past: recordedPast(inputs),
    paths: inputs.paths ?? null,
    bufferTargetS: params.bufferTargetS,
    ...(params.safety === undefined ? {} : { safety: params.safety }),
    ...(params.reservoirS === undefined ? {} : { reservoirS: params.reservoirS }),
  });
}

// The plain rate-based rule: the highest rung not above the harmonic mean of the last five
// download rates (the "RB" baseline of Yin, Jindal, Sekar and Sinopoli, SIGCOMM 2015, with the
// harmonic mean of Jiang, Sekar and Zhang, CoNEXT 2012). See docs/abr.md.
import {
  checkLadder, DEFAULT_WINDOW, harmonicMean, highestAtMost, recentDownloads, recordedLadder, recordedPast,
} from '../common.js';

// Input: { ladder, past (downloads, most recent last), window }. With no usable download yet
// there is no estimate and the lowest rung is chosen.
export function rateBased({ ladder, past = [], window = DEFAULT_WINDOW }) {
  checkLadder(ladder);
  const throughputsBps = recentDownloads(past, window).map((d) => d.bps);
  const estimateBps = harmonicMean(throughputsBps);
  const index = estimateBps === null ? 0 : highestAtMost(ladder, estimateBps);
  return { rule: 'rate-based', index, bitrate: ladder[index].bitrate, estimateBps, throughputsBps, window };
}

// A session's decision (engine.js) from its recorded inputs and the rule's parameters
// (catalog.json: window).
export function decide(inputs, params) {
  return rateBased({
    ladder: recordedLadder(inputs),
    past: recordedPast(inputs),
    ...(params.window === undefined ? {} : { window: params.window }),
  });
}

// BBA-0: the rate is a function of the buffer alone (Huang, Johari, McKeown, Trunnell and Watson,
// "A Buffer-Based Approach to Rate Adaptation: Evidence from a Large Video Streaming Service",
// SIGCOMM 2014). Written from the paper's definition; see docs/abr.md.
import {
  checkIndex, checkLadder, checkSeconds, DEFAULT_BUFFER_TARGET_S, recordedLadder,
} from '../common.js';

// The paper's client held 240 s of video, with a 90 s reservoir and a 126 s cushion above it
// (the top 24 s, a tenth of the buffer, maps to the top rate). A player here buffers far less, so
// the same shares are taken of its own buffer target unless the reservoir and cushion are given.
export const BBA0_PAPER_BUFFER_S = 240;
export const BBA0_PAPER_RESERVOIR_S = 90;
export const BBA0_PAPER_CUSHION_S = 126;

// The rate map f(B): R_min up to the reservoir, R_max from the end of the cushion, a straight
// line between.
export function bba0RateMap(bufferS, { minBps, maxBps, reservoirS, cushionS }) {
  if (bufferS <= reservoirS) return minBps;
  if (bufferS >= reservoirS + cushionS) return maxBps;
  return minBps + ((maxBps - minBps) * (bufferS - reservoirS)) / cushionS;
}

// Input: { ladder, bufferS, previous (index of the last rung chosen; the lowest when absent),
// reservoirS, cushionS (seconds; by default the paper's shares of bufferTargetS) }.
// Output: the chosen index and what chose it (docs/abr.md, "The decision object").
export function bba0({ ladder, bufferS, previous = null, reservoirS = null, cushionS = null,
  bufferTargetS = DEFAULT_BUFFER_TARGET_S }) {
  checkLadder(ladder);
  checkSeconds('bufferS', bufferS);
  checkSeconds('bufferTargetS', bufferTargetS, { positive: true });
  const prev = previous ?? 0;
  checkIndex('previous', prev, ladder);
  const r = reservoirS ?? (bufferTargetS * BBA0_PAPER_RESERVOIR_S) / BBA0_PAPER_BUFFER_S;
  const cu = cushionS ?? (bufferTargetS * BBA0_PAPER_CUSHION_S) / BBA0_PAPER_BUFFER_S;
  checkSeconds('reservoirS', r);
  checkSeconds('cushionS', cu);

  const rates = ladder.map((rung) => rung.bitrate);
  const top = rates.length - 1;
  const f = bba0RateMap(bufferS, { minBps: rates[0], maxBps: rates[top], reservoirS: r, cushionS: cu });
  const prevRate = rates[prev];
  // Rate+ and Rate-: the next distinct rates above and below the previous one (the previous rate
  // itself at either end of the ladder).
  const up = rates.find((rate) => rate > prevRate) ?? prevRate;
  const down = rates.filter((rate) => rate < prevRate).pop() ?? prevRate;

  let index;
  let region;
  if (bufferS <= r) {
    index = 0;
    region = 'reservoir';
  } else if (bufferS >= r + cu) {
    index = top;
    region = 'upper';
  } else {
    region = 'cushion';
    if (up > prevRate && f >= up) index = rates.filter((rate) => rate < f).length - 1;
    else if (down < prevRate && f <= down) index = rates.findIndex((rate) => rate > f);
    else index = prev; // f lies between the neighbours of the previous rate: no switch
  }
  return {
    rule: 'bba0',
    index,
    bitrate: rates[index],
    previous: prev,
    bufferS,
    region,
    rateMapBps: f,
    reservoirS: r,
    cushionS: cu,
  };
}

// A session's decision (engine.js) from its recorded inputs and the rule's parameters
// (catalog.json: reservoirS, cushionS; and the player's bufferTargetS).
export function decide(inputs, params) {
  return bba0({
    ladder: recordedLadder(inputs),
    bufferS: inputs.buffer_s,
    previous: inputs.previous,
    bufferTargetS: params.bufferTargetS,
    reservoirS: params.reservoirS ?? null,
    cushionS: params.cushionS ?? null,
  });
}

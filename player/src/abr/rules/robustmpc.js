// RobustMPC: plan the next few segments against a cautious throughput estimate and take the
// first step of the best plan (Yin, Jindal, Sekar and Sinopoli, "A Control-Theoretic Approach for
// Dynamic Adaptive Video Streaming over HTTP", SIGCOMM 2015). Written from the paper's
// definitions; see docs/abr.md.
//
// The rule keeps no state of its own. Its error discount needs the predictions it made before:
// each decision returns `predictionBps`, and the caller stores it on the download that follows as
// `predictedBps`, so the errors are read back from `past`.
import {
  checkIndex, checkLadder, checkSeconds, DEFAULT_WINDOW, harmonicMean, recentDownloads, recordedLadder,
  recordedPast,
} from '../common.js';

export const DEFAULT_HORIZON = 5;
// Weight of a switch against a rung's bitrate (the paper's "balanced" preference).
export const DEFAULT_LAMBDA = 1;

const MBPS = 1e6;

// The throughput the plan is made with: the harmonic mean of the last `window` download rates
// divided by 1 + the largest relative error of the predictions made for those downloads.
export function robustEstimate(past, window = DEFAULT_WINDOW) {
  const recent = recentDownloads(past, window);
  const throughputsBps = recent.map((d) => d.bps);
  const predictionBps = harmonicMean(throughputsBps);
  const errors = recent
    .filter((d) => d.download.predictedBps > 0 && Number.isFinite(d.download.predictedBps))
    .map((d) => Math.abs(d.download.predictedBps - d.bps) / d.bps);
  const maxError = errors.length ? Math.max(...errors) : 0;
  const estimateBps = predictionBps === null ? null : predictionBps / (1 + maxError);
  return { throughputsBps, predictionBps, errors, maxError, estimateBps };
}

// One segment of a plan: download it at rung i with the estimated throughput, then play on.
// The buffer drains while the segment downloads (what it lacks is rebuffering) and gains one
// segment when it arrives; a buffer limit holds the download back instead of growing past it.
function step(model, state, i) {
  const downloadS = (model.segmentS * model.rates[i]) / model.estimateBps;
  const rebufferS = Math.max(downloadS - state.bufferS, 0);
  let bufferS = Math.max(state.bufferS - downloadS, 0) + model.segmentS;
  if (model.bufferMaxS != null) bufferS = Math.min(bufferS, model.bufferMaxS);
  const quality = model.rates[i] / MBPS;
  const switchMbps = state.last === null ? 0 : Math.abs(quality - model.rates[state.last] / MBPS);
  return {
    bufferS,
    last: i,
    rebufferS: state.rebufferS + rebufferS,
    qoe: state.qoe + quality - model.lambda * switchMbps - model.mu * rebufferS,
  };
}

function resolveModel({ ladder, bufferS, segmentS, estimateBps, previous = null, lambda = DEFAULT_LAMBDA,
  mu = null, bufferMaxS = null }) {
  checkLadder(ladder);
  checkSeconds('bufferS', bufferS);
  checkSeconds('segmentS', segmentS, { positive: true });
  if (previous !== null) checkIndex('previous', previous, ladder);
  if (bufferMaxS !== null) checkSeconds('bufferMaxS', bufferMaxS, { positive: true });
  const rates = ladder.map((rung) => rung.bitrate);
  // A second of rebuffering costs as much as a segment's worth of the top rung gains: the paper
  // sets the penalty to the top bitrate of its ladder (3000 with bitrates in kbit/s).
  const rebufferPenalty = mu ?? rates[rates.length - 1] / MBPS;
  return { rates, segmentS, estimateBps, lambda, mu: rebufferPenalty, bufferMaxS,
    start: { bufferS, last: previous, rebufferS: 0, qoe: 0 } };
}

// The QoE the model predicts for a plan (rung indices, next segment first): Σ bitrate (Mbit/s)
// − lambda Σ |bitrate change| − mu × rebuffering seconds, and the buffer it leaves.
export function planQoe(plan, input) {
  if (!(input.estimateBps > 0)) throw new RangeError(`estimateBps: must be a positive number of bit/s, got ${input.estimateBps}`);
  const model = resolveModel(input);
  const end = plan.reduce((state, i) => step(model, state, i), model.start);
  return { qoe: end.qoe, rebufferS: end.rebufferS, bufferS: end.bufferS };
}

// Every plan of `horizon` segments is tried (ladder length ^ horizon); the best QoE wins, and of
// equal ones the first met, which is the one with the lower rungs first.
function bestPlan(model, horizon) {
  let best = { qoe: -Infinity, plan: null };
  const plan = new Array(horizon);
  const visit = (depth, state) => {
    if (depth === horizon) {
      if (state.qoe > best.qoe) best = { qoe: state.qoe, plan: plan.slice() };
      return;
    }
    for (let i = 0; i < model.rates.length; i += 1) {
      plan[depth] = i;
      visit(depth + 1, step(model, state, i));
    }
  };
  visit(0, model.start);
  return best;
}

// Input: { ladder, bufferS, segmentS, past (downloads, most recent last, with predictedBps where a
// prediction was made), previous (last rung chosen, null before the first), horizon, window,
// lambda, mu (default: the top bitrate in Mbit/s), bufferMaxS (the player's buffer limit, none
// by default), segmentsLeft (shortens the horizon at the end of a presentation) }.
export function robustMpc({ ladder, bufferS, segmentS, past = [], previous = null, horizon = DEFAULT_HORIZON,
  window = DEFAULT_WINDOW, lambda = DEFAULT_LAMBDA, mu = null, bufferMaxS = null, segmentsLeft = null }) {
  if (!Number.isInteger(horizon) || horizon < 1) throw new RangeError(`horizon: must be a positive integer, got ${horizon}`);
  if (segmentsLeft !== null && !(Number.isInteger(segmentsLeft) && segmentsLeft >= 1)) {
    throw new RangeError(`segmentsLeft: must be a positive integer, got ${segmentsLeft}`);
  }
  const estimate = robustEstimate(past, window);
  const model = resolveModel({ ladder, bufferS, segmentS, estimateBps: estimate.estimateBps, previous, lambda, mu,
    bufferMaxS });
  const steps = Math.min(horizon, segmentsLeft ?? horizon);
  // Nothing measured yet: no plan can be costed, so start from the bottom as the rate-based rule does.
  const { qoe, plan } = estimate.estimateBps === null ? { qoe: null, plan: null } : bestPlan(model, steps);
  const index = plan ? plan[0] : 0;
  return {
    rule: 'robust-mpc',
    index,
    bitrate: ladder[index].bitrate,
    previous,
    bufferS,
    segmentS,
    ...estimate,
    window,
    horizon: steps,
    lambda,
    mu: model.mu,
    bufferMaxS,
    plan,
    qoe,
  };
}

// A session's decision (engine.js) from its recorded inputs and the rule's parameters
// (catalog.json: horizon, lambda, mu; the player's bufferTargetS is its buffer limit).
export function decide(inputs, params) {
  return robustMpc({
    ladder: recordedLadder(inputs),
    bufferS: inputs.buffer_s,
    segmentS: inputs.segment_s,
    past: recordedPast(inputs),
    previous: inputs.previous,
    bufferMaxS: params.bufferTargetS,
    ...(params.horizon === undefined ? {} : { horizon: params.horizon }),
    ...(params.lambda === undefined ? {} : { lambda: params.lambda }),
    ...(params.mu === undefined ? {} : { mu: params.mu }),
  });
}

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { harmonicMean, throughputBps } from '../src/abr/common.js';
import { bba0, bba0RateMap } from '../src/abr/rules/bba0.js';
import { rateBased } from '../src/abr/rules/rate-based.js';
import { planQoe, robustEstimate, robustMpc } from '../src/abr/rules/robustmpc.js';

const M = 1e6;
const ladderOf = (...mbps) => mbps.map((m) => ({ bitrate: m * M }));
// A download that ran at `mbps` for one second; `predictedMbps` is what RobustMPC had predicted for it.
const download = (mbps, predictedMbps) => ({
  bytes: (mbps * M) / 8,
  durationMs: 1000,
  ...(predictedMbps === undefined ? {} : { predictedBps: predictedMbps * M }),
});

function deepFreeze(value) {
  if (value && typeof value === 'object') {
    Object.values(value).forEach(deepFreeze);
    Object.freeze(value);
  }
  return value;
}

// A small deterministic generator, so a failing property names a reproducible case.
function random(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomLadder(next, maxRungs) {
  const n = 1 + Math.floor(next() * maxRungs);
  const rates = Array.from({ length: n }, () => Math.round(100e3 + next() * 8e6));
  return rates.sort((a, b) => a - b).map((bitrate) => ({ bitrate }));
}

function randomPast(next) {
  const n = Math.floor(next() * 8);
  return Array.from({ length: n }, () => ({
    bytes: Math.round(10e3 + next() * 3e6),
    t_request: 1000,
    t_done: 1000 + Math.round(50 + next() * 8000),
    ...(next() < 0.7 ? { predictedBps: 100e3 + next() * 9e6 } : {}),
  }));
}

// --- shared measurements -----------------------------------------------------------------------

test('a download rate is bytes x 8 over its duration, from durationMs or the probe times', () => {
  assert.equal(throughputBps({ bytes: 500_000, durationMs: 2000 }), 2 * M);
  assert.equal(throughputBps({ bytes: 500_000, t_request: 10_000, t_done: 12_000 }), 2 * M);
  assert.equal(throughputBps({ bytes: 500_000, durationMs: 0 }), null);
  assert.equal(throughputBps({ bytes: 0, durationMs: 100 }), null);
  assert.equal(throughputBps({ bytes: 500_000 }), null);
});

test('the harmonic mean follows the slow samples', () => {
  // 3 / (1/1 + 1/4 + 1/4) = 3 / 1.5 = 2, where the arithmetic mean would be 3.
  assert.equal(harmonicMean([1, 4, 4]), 2);
  assert.equal(harmonicMean([]), null);
});

test('a ladder out of order or a bad buffer is refused by name', () => {
  assert.throws(() => rateBased({ ladder: ladderOf(2, 1) }), /ladder\[1\]\.bitrate: .*sorted/);
  assert.throws(() => rateBased({ ladder: [] }), /ladder: must be a non-empty list/);
  assert.throws(() => bba0({ ladder: ladderOf(1), bufferS: -1 }), /bufferS: must be a non-negative/);
  assert.throws(() => bba0({ ladder: ladderOf(1, 2), bufferS: 1, previous: 2 }), /previous: must be a rung index from 0 to 1/);
  assert.throws(() => robustMpc({ ladder: ladderOf(1), bufferS: 1, segmentS: 0 }), /segmentS: must be a positive/);
  assert.throws(() => robustMpc({ ladder: ladderOf(1), bufferS: 1, segmentS: 4, horizon: 0 }), /horizon: must be a positive integer/);
});

// --- BBA-0 -------------------------------------------------------------------------------------

// Hand-worked, ladder 0.5 / 1 / 2 / 4 Mbit/s, reservoir r = 10 s, cushion cu = 20 s:
//   f(B) = R_min + (R_max - R_min) (B - r) / cu.
//   B = 20 s: f = 0.5 + 3.5 x 10/20 = 2.25 Mbit/s.
//     previous 0.5: Rate+ = 1 <= 2.25, so up to max{R_i < 2.25} = 2 Mbit/s (index 2), skipping 1.
//     previous 1:   Rate+ = 2 <= 2.25, so up to 2 Mbit/s (index 2).
//     previous 2:   Rate- = 1 < 2.25 < 4 = Rate+, so stay at 2 Mbit/s.
//     previous 4:   Rate- = 2 < 2.25, Rate+ = R_max: stay at 4 Mbit/s (the paper's hysteresis).
//   B = 12 s: f = 0.5 + 3.5 x 2/20 = 0.85 Mbit/s; from 4 Mbit/s Rate- = 2 >= 0.85, so down to
//     min{R_i > 0.85} = 1 Mbit/s (index 1), skipping 2.
//   B <= 10 s (in the reservoir): R_min. B >= 30 s (r + cu): R_max.
const BBA = { ladder: ladderOf(0.5, 1, 2, 4), reservoirS: 10, cushionS: 20 };

test('BBA-0 picks the lowest rung in the reservoir and the top rung past reservoir + cushion', () => {
  const ends = [
    { buffers: [0, 5, 10], index: 0, region: 'reservoir' },
    { buffers: [30, 31, 200], index: 3, region: 'upper' },
  ];
  for (const { buffers, index, region } of ends) {
    for (const previous of [0, 1, 2, 3]) {
      for (const bufferS of buffers) {
        const d = bba0({ ...BBA, bufferS, previous });
        assert.deepEqual([d.index, d.region], [index, region], `B=${bufferS} previous=${previous}`);
      }
    }
  }
});

test('BBA-0 in the cushion follows the linear rate map with the paper\'s hysteresis', () => {
  const at20 = (previous) => bba0({ ...BBA, bufferS: 20, previous });
  assert.equal(at20(0).rateMapBps, 2.25 * M);
  assert.deepEqual([0, 1, 2, 3].map((p) => at20(p).index), [2, 2, 2, 3]);
  const at12 = bba0({ ...BBA, bufferS: 12, previous: 3 });
  assert.ok(Math.abs(at12.rateMapBps - 0.85 * M) < 1e-6);
  assert.equal(at12.index, 1);
  assert.equal(at12.region, 'cushion');
  // Before any choice BBA-0 starts from R_min, so at B = 20 s it climbs to 2 Mbit/s.
  assert.equal(bba0({ ...BBA, bufferS: 20 }).index, 2);
});

test('BBA-0 without a reservoir and cushion takes the paper\'s shares of the buffer target', () => {
  // 240 s buffer, 90 s reservoir, 126 s cushion; for a 30 s target: 11.25 s and 15.75 s.
  const ladder = ladderOf(1, 2, 3);
  const d = bba0({ ladder, bufferS: 11.25, previous: 2 });
  assert.equal(d.reservoirS, 11.25);
  assert.equal(d.cushionS, 15.75);
  assert.equal(d.index, 0);
  assert.equal(bba0({ ladder, bufferS: 27, previous: 0 }).index, 2);
  assert.equal(bba0({ ladder, bufferS: 26.9, previous: 0 }).index, 1);
  const small = bba0({ ladder, bufferS: 5, bufferTargetS: 12 });
  assert.deepEqual([small.reservoirS, small.cushionS], [4.5, 6.3]);
  assert.equal(bba0RateMap(19.125, { minBps: 1, maxBps: 3, reservoirS: 11.25, cushionS: 15.75 }), 2);
});

test('BBA-0 is monotone in the buffer and stays on the ladder (random ladders)', () => {
  const next = random(2014);
  for (let round = 0; round < 200; round += 1) {
    const ladder = randomLadder(next, 8);
    const previous = Math.floor(next() * ladder.length);
    const reservoirS = next() * 20;
    const cushionS = next() * 40;
    let last = -1;
    for (let bufferS = 0; bufferS <= 70; bufferS += 0.25) {
      const { index } = bba0({ ladder, bufferS, previous, reservoirS, cushionS });
      assert.ok(index >= 0 && index < ladder.length, `round ${round}: index ${index}`);
      assert.ok(index >= last, `round ${round}: B=${bufferS} gave ${index} after ${last}`);
      last = index;
    }
  }
});

test('BBA-0 on a one-rung ladder always picks it', () => {
  for (const bufferS of [0, 12, 40]) assert.equal(bba0({ ladder: ladderOf(1), bufferS }).index, 0);
});

// --- rate-based --------------------------------------------------------------------------------

test('rate-based picks the highest rung not above the harmonic mean of the last 5 rates', () => {
  const ladder = ladderOf(0.5, 1, 2, 3);
  // 5 / (1/2 + 3 x 1/4 + 1/1) = 5 / 2.25 = 2.22 Mbit/s -> 2 Mbit/s. The arithmetic mean, 3 Mbit/s,
  // would have picked 3. The sixth-from-last download (0.1 Mbit/s) is outside the window.
  const past = [download(0.1), download(2), download(4), download(4), download(4), download(1)];
  const d = rateBased({ ladder, past });
  assert.ok(Math.abs(d.estimateBps - (5 / 2.25) * M) < 1e-6);
  assert.equal(d.throughputsBps.length, 5);
  assert.equal(d.index, 2);
  assert.equal(d.bitrate, 2 * M);
});

test('rate-based with fewer than 5 downloads averages what it has; with none it starts at the bottom', () => {
  const ladder = ladderOf(0.5, 1, 2, 3);
  // 2 / (1/2 + 1/4) = 2.67 Mbit/s -> 2 Mbit/s.
  const two = rateBased({ ladder, past: [download(2), { bytes: 500_000, t_request: 0, t_done: 1000 }] });
  assert.ok(Math.abs(two.estimateBps - (8 / 3) * M) < 1e-6);
  assert.equal(two.index, 2);
  const none = rateBased({ ladder, past: [] });
  assert.deepEqual([none.index, none.estimateBps], [0, null]);
  // A download with no duration (a cached response) is not a rate and does not count.
  assert.equal(rateBased({ ladder, past: [{ bytes: 9e6, durationMs: 0 }] }).index, 0);
});

test('rate-based takes a rung whose bitrate equals the estimate, and the bottom when all are above', () => {
  const ladder = ladderOf(0.5, 1, 2, 3);
  assert.equal(rateBased({ ladder, past: [download(2), download(2)] }).index, 2);
  assert.equal(rateBased({ ladder, past: [download(0.2)] }).index, 0);
  assert.equal(rateBased({ ladder, past: [download(50)] }).index, 3);
});

test('rate-based never picks a lower rung for faster downloads (random ladders)', () => {
  const next = random(2015);
  for (let round = 0; round < 200; round += 1) {
    const ladder = randomLadder(next, 8);
    const past = randomPast(next);
    const slow = rateBased({ ladder, past });
    const fast = rateBased({ ladder, past: past.map((d) => ({ ...d, bytes: d.bytes * 2 })) });
    assert.ok(slow.index >= 0 && slow.index < ladder.length);
    assert.ok(fast.index >= slow.index, `round ${round}`);
  }
});

// --- RobustMPC ---------------------------------------------------------------------------------

test('RobustMPC discounts the harmonic mean by 1 + the largest error of the last 5 predictions', () => {
  // Rates 3 Mbit/s throughout; the last download had been predicted at 4.5 (|4.5 - 3| / 3 = 0.5),
  // the others exactly. The sixth-from-last prediction was far off (9 vs 3: error 2) but is out
  // of the window. Estimate = 3 / (1 + 0.5) = 2 Mbit/s.
  const past = [download(3, 9), download(3, 3), download(3, 3), download(3), download(3, 3), download(3, 4.5)];
  const e = robustEstimate(past);
  assert.equal(e.predictionBps, 3 * M);
  assert.deepEqual(e.errors, [0, 0, 0, 0.5]);
  assert.equal(e.maxError, 0.5);
  assert.equal(e.estimateBps, 2 * M);
  // An underestimate counts as much as an overestimate: predicted 1.5 for 3 is also 0.5 off.
  assert.equal(robustEstimate([download(3, 1.5)]).estimateBps, 2 * M);
});

// Hand-worked horizon-2 search. Ladder 1 / 2 / 3 Mbit/s, 4 s segments, estimate C = 2 Mbit/s,
// buffer 4 s, previous 1 Mbit/s; lambda = 1, mu = 3 (the top bitrate in Mbit/s).
// Downloading a segment at R takes 4 R / 2 = 2R s: 2, 4 or 6 s. Rebuffering is what the download
// takes beyond the buffer; the buffer then is what is left plus 4 s.
//   plan  step 1                 step 2                   QoE = sum R - |switches| - 3 x rebuffer
//   1,1   2 s, B -> 6            2 s, B -> 8              2 - 0 - 0            =  2
//   1,2   2 s, B -> 6            4 s, B -> 6              3 - 1 - 0            =  2
//   1,3   2 s, B -> 6            6 s, B -> 4              4 - 2 - 0            =  2
//   2,1   4 s, B -> 4            2 s, B -> 6              3 - 2 - 0            =  1
//   2,2   4 s, B -> 4            4 s, B -> 4              4 - 1 - 0            =  3   <- best
//   2,3   4 s, B -> 4            6 s: 2 s stall, B -> 4   5 - 2 - 6            = -3
//   3,1   6 s: 2 s stall, B -> 4 2 s, B -> 6              4 - 4 - 6            = -6
//   3,2   6 s: 2 s stall, B -> 4 4 s, B -> 4              5 - 3 - 6            = -4
//   3,3   6 s: 2 s stall, B -> 4 6 s: 2 s stall, B -> 4   6 - 2 - 12           = -8
// So the first step is 2 Mbit/s. With a horizon of 1 the switch cost eats the gain (1 Mbit/s: 1;
// 2 Mbit/s: 2 - 1 = 1) and the tie goes to the lower rung.
const HAND = { ladder: ladderOf(1, 2, 3), bufferS: 4, segmentS: 4, previous: 0 };

test('the QoE model of RobustMPC matches the hand-worked table', () => {
  const table = { '0,0': 2, '0,1': 2, '0,2': 2, '1,0': 1, '1,1': 3, '1,2': -3, '2,0': -6, '2,1': -4, '2,2': -8 };
  for (const [plan, qoe] of Object.entries(table)) {
    const got = planQoe(plan.split(',').map(Number), { ...HAND, estimateBps: 2 * M });
    assert.equal(got.qoe, qoe, `plan ${plan}`);
  }
  assert.deepEqual(planQoe([2, 2], { ...HAND, estimateBps: 2 * M }), { qoe: -8, rebufferS: 4, bufferS: 4 });
});

test('RobustMPC with horizon 2 takes the first step of the best plan of the hand-worked case', () => {
  const past = [download(2), download(2)];
  const d = robustMpc({ ...HAND, past, horizon: 2 });
  assert.deepEqual(d.plan, [1, 1]);
  assert.equal(d.qoe, 3);
  assert.equal(d.index, 1);
  assert.equal(d.mu, 3);
  assert.equal(robustMpc({ ...HAND, past, horizon: 1 }).index, 0);
});

test('RobustMPC plans with the discounted estimate, not the raw mean', () => {
  // At 3 Mbit/s undiscounted, plan 3,3 fits: 4 s per segment against a 4 s buffer, QoE 6 - 2 = 4.
  assert.deepEqual(robustMpc({ ...HAND, past: [download(3), download(3)], horizon: 2 }).plan, [2, 2]);
  // The same rates with a 50 % miss in the window: the estimate is 2 Mbit/s, the table above.
  const d = robustMpc({ ...HAND, past: [download(3), download(3, 4.5)], horizon: 2 });
  assert.equal(d.estimateBps, 2 * M);
  assert.deepEqual(d.plan, [1, 1]);
});

test('RobustMPC with the default horizon of 5: the obvious cases', () => {
  const ladder = ladderOf(1, 2, 3);
  const fast = robustMpc({ ladder, bufferS: 20, segmentS: 4, past: [download(50), download(50)], previous: 2 });
  assert.equal(fast.horizon, 5);
  assert.deepEqual(fast.plan, [2, 2, 2, 2, 2]);
  // At 0.2 Mbit/s even the lowest rung stalls (20 s a segment); anything higher stalls longer.
  const slow = robustMpc({ ladder, bufferS: 0, segmentS: 4, past: [download(0.2)], previous: 0 });
  assert.deepEqual(slow.plan, [0, 0, 0, 0, 0]);
  assert.equal(slow.index, 0);
});

// Rebuffer-heavy: ladder 1 / 2 / 3 Mbit/s, 4 s segments, steady 3.2 Mbit/s, 1 s of buffer, last
// rung 3 Mbit/s. Rate-based stays at 3 Mbit/s (3 <= 3.2). RobustMPC (mu = 3) sees that a 3 Mbit/s
// segment takes 3.75 s and would stall 2.75 s:
//   3,3,3,3,3: 3 - 8.25 = -5.25 then 4 x 3 = 12                         -> 6.75
//   2,3,3,3,3: 2 - 1 - 4.5 (2.5 s download, 1.5 s stall), 3 - 1, 3 x 3  -> 7.5
//   1,3,3,3,3: 1 - 2 - 0.75 (1.25 s download, 0.25 s stall), 3 - 2, 3 x 3 -> 8.25 (the best)
test('RobustMPC drops lower than rate-based when the buffer cannot cover the download', () => {
  const ladder = ladderOf(1, 2, 3);
  const past = Array.from({ length: 5 }, () => download(3.2));
  assert.equal(rateBased({ ladder, past }).index, 2);
  const d = robustMpc({ ladder, bufferS: 1, segmentS: 4, past, previous: 2 });
  assert.deepEqual(d.plan, [0, 2, 2, 2, 2]);
  assert.ok(Math.abs(d.qoe - 8.25) < 1e-9);
  assert.equal(d.index, 0);
  assert.ok(Math.abs(planQoe([2, 2, 2, 2, 2], { ladder, bufferS: 1, segmentS: 4, previous: 2, estimateBps: 3.2 * M }).qoe - 6.75) < 1e-9);
  // With 8 s of buffer the same network keeps 3 Mbit/s.
  assert.equal(robustMpc({ ladder, bufferS: 8, segmentS: 4, past, previous: 2 }).index, 2);
});

test('RobustMPC shortens the horizon at the end and honours a buffer limit', () => {
  const ladder = ladderOf(1, 2, 3);
  const past = [download(2)];
  assert.equal(robustMpc({ ladder, bufferS: 4, segmentS: 4, past, segmentsLeft: 2 }).plan.length, 2);
  // Without a limit a 12 s buffer would grow to 12 - 2 + 4 = 14 s after a 1 Mbit/s segment; capped
  // at 10 s the model waits instead.
  assert.equal(planQoe([0], { ladder, bufferS: 12, segmentS: 4, estimateBps: 2 * M }).bufferS, 14);
  assert.equal(planQoe([0], { ladder, bufferS: 12, segmentS: 4, estimateBps: 2 * M, bufferMaxS: 10 }).bufferS, 10);
});

test('RobustMPC with nothing measured starts at the bottom', () => {
  const d = robustMpc({ ladder: ladderOf(1, 2, 3), bufferS: 30, segmentS: 4, past: [] });
  assert.deepEqual([d.index, d.estimateBps, d.plan, d.qoe], [0, null, null, null]);
});

test('RobustMPC stays on the ladder and its first step is its plan\'s (random ladders)', () => {
  const next = random(2016);
  for (let round = 0; round < 60; round += 1) {
    const ladder = randomLadder(next, 5);
    const past = randomPast(next);
    const previous = next() < 0.2 ? null : Math.floor(next() * ladder.length);
    const d = robustMpc({ ladder, bufferS: next() * 30, segmentS: 1 + Math.floor(next() * 6), past, previous });
    assert.ok(d.index >= 0 && d.index < ladder.length, `round ${round}`);
    if (d.plan) {
      assert.equal(d.plan.length, 5);
      assert.equal(d.plan[0], d.index);
      assert.ok(d.plan.every((i) => i >= 0 && i < ladder.length));
    }
  }
});

// --- the decision object -----------------------------------------------------------------------

test('decisions are pure: frozen inputs are not touched and the same inputs give the same decision', () => {
  const input = deepFreeze({ ladder: ladderOf(0.5, 1, 2, 3), bufferS: 9, segmentS: 4, previous: 1,
    past: [download(2, 2.5), download(1.5, 2), download(2.5, 1.8)] });
  for (const rule of [bba0, rateBased, robustMpc]) {
    assert.deepEqual(rule(input), rule(input));
  }
});

test('a decision survives JSON, so an event can carry it', () => {
  const input = { ladder: ladderOf(0.5, 1, 2, 3), bufferS: 9, segmentS: 4, previous: 1, past: [download(2, 2.5)] };
  for (const rule of [bba0, rateBased, robustMpc]) {
    const decision = rule(input);
    assert.deepEqual(JSON.parse(JSON.stringify(decision)), decision);
    assert.equal(decision.bitrate, input.ladder[decision.index].bitrate);
    assert.equal(typeof decision.rule, 'string');
  }
});

test('a RobustMPC session replays: predictions stored on the downloads give back the same decisions', () => {
  const ladder = ladderOf(0.5, 1, 2, 3);
  const rates = [2.5, 1.2, 0.8, 3, 2, 2.2, 0.6];
  const live = [];
  const past = [];
  let previous = null;
  let bufferS = 2;
  for (const mbps of rates) {
    const decision = robustMpc({ ladder, bufferS, segmentS: 4, past, previous });
    live.push(decision);
    past.push({ ...download(mbps), ...(decision.predictionBps ? { predictedBps: decision.predictionBps } : {}) });
    previous = decision.index;
    bufferS = Math.max(bufferS - (4 * ladder[decision.index].bitrate) / (mbps * M), 0) + 4;
  }
  // Offline, from the recorded inputs of each decision alone.
  live.forEach((decision, k) => {
    const again = robustMpc({ ladder, bufferS: decision.bufferS, segmentS: 4, past: past.slice(0, k), previous: decision.previous });
    assert.deepEqual(again, decision);
  });
  // The stored predictions did feed the discount: by the end it is not zero.
  assert.ok(live.at(-1).maxError > 0);
});

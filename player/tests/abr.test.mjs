import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bba0, bba0RateMap, harmonicMean, rateBased, throughputBps } from '../src/abr/index.js';

const M = 1e6;
const ladderOf = (...mbps) => mbps.map((m) => ({ bitrate: m * M }));
// A download that ran at `mbps` for one second; `predictedMbps` is what RobustMPC had predicted for it.
const download = (mbps, predictedMbps) => ({
  bytes: (mbps * M) / 8,
  durationMs: 1000,
  ...(predictedMbps === undefined ? {} : { predictedBps: predictedMbps * M }),
});

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


import assert from 'node:assert/strict';
import { test } from 'node:test';
import { harmonicMean, rateBased, throughputBps } from '../src/abr/index.js';

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


// The multipath-aware rule (abr/rules/multipath.js) on hand-worked cases, the path figures it is
// given (abr/paths.js) from the collector's answers, and the engine handing them over and
// recording them so the decision replays. The players run it in tests/e2e/test_player_abr_multipath.py.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AbrEngine, replayDecision } from '../src/abr/engine.js';
import { FAILED_AFTER_MS, PATH_WINDOW_MS, PathWatch } from '../src/abr/paths.js';
import { DEFAULT_SAFETY, multipath } from '../src/abr/rules/multipath.js';

const M = 1e6;
const LADDER = [0.5, 1, 2, 3, 4].map((mbps) => ({ bitrate: mbps * M }));
const path = (n, mbps, extra = {}) => ({ address: `10.1.${n}.2`, bps: mbps * M, held: false, spared: false, live: true, ...extra });
// A download of `mbps` over one second.
const download = (mbps, t0) => ({ bytes: (mbps * M) / 8, t_request: t0, t_done: t0 + 1000 });

test('with a full buffer the rung is the highest under safety times the free paths\' sum', () => {
  // 2 + 1.6 = 3.6 Mbit/s; 0.85 × 3.6 = 3.06: the 3 Mbit/s rung, where one path alone (2 × 0.85
  // = 1.7) allows only the 1 Mbit/s rung.
  const both = multipath({ ladder: LADDER, bufferS: 20, segmentS: 2, paths: [path(0, 2), path(1, 1.6)] });
  assert.equal(both.index, 3);
  assert.equal(both.source, 'paths');
  assert.equal(both.freeBps, 3.6 * M);
  assert.equal(both.room, DEFAULT_SAFETY);
  const one = multipath({ ladder: LADDER, bufferS: 20, segmentS: 2, paths: [path(0, 2)] });
  assert.equal(one.index, 1);
});

test('downloads that measure slow over two paths do not hold the rung down once the buffer holds', () => {
  const past = [1, 1.1, 0.9, 1, 1].map((mbps, i) => download(mbps, i * 2000));
  const decision = multipath({ ladder: LADDER, bufferS: 12, segmentS: 2, past, paths: [path(0, 2), path(1, 2)] });
  assert.equal(decision.index, 3); // 0.85 × 4 = 3.4 Mbit/s
  assert.ok(Math.abs(decision.downloadsBps - 0.995 * M) < 0.01 * M);
});

test('a path the policy spares serves the buffer, never the rung, even while it carries data', () => {
  const paths = [path(0, 1.5), path(1, 3, { held: false, spared: true })];
  const decision = multipath({ ladder: LADDER, bufferS: 20, segmentS: 2, paths });
  assert.equal(decision.index, 1); // 0.85 × 1.5 = 1.275: the 1 Mbit/s rung, not the sum's 3
  assert.equal(decision.heldBps, 3 * M);
  assert.equal(decision.freeBps, 1.5 * M);
});

test('a path held back counts once the policy lets it carry data', () => {
  const held = multipath({ ladder: LADDER, bufferS: 20, segmentS: 2, paths: [path(0, 1.5), path(1, 3, { held: true })] });
  assert.equal(held.index, 1);
  const released = multipath({ ladder: LADDER, bufferS: 20, segmentS: 2, paths: [path(0, 1.5), path(1, 3)] });
  assert.equal(released.index, 3); // 0.85 × 4.5 = 3.8
});

test('a path that stopped delivering does not count', () => {
  const decision = multipath({ ladder: LADDER, bufferS: 20, segmentS: 2, paths: [path(0, 2), path(1, 3, { live: false })] });
  assert.equal(decision.index, 1);
});

test('below the reservoir the slower of the two figures rules, with half the room at an empty buffer', () => {
  const past = [download(1.2, 0)];
  // Reservoir: 2 segments of 2 s = 4 s. At 2 s the room is 0.85 × (0.5 + 0.25) = 0.6375 of
  // min(4, 1.2) Mbit/s = 0.765: the lowest rung.
  const low = multipath({ ladder: LADDER, bufferS: 2, segmentS: 2, past, paths: [path(0, 2), path(1, 2)] });
  assert.equal(low.reservoirS, 4);
  assert.ok(Math.abs(low.room - 0.6375) < 1e-12);
  assert.equal(low.estimateBps, 1.2 * M);
  assert.equal(low.index, 0);
  // No download yet: the paths alone, at half the room (0.425 × 4 = 1.7 Mbit/s).
  const first = multipath({ ladder: LADDER, bufferS: 0, segmentS: 2, paths: [path(0, 2), path(1, 2)] });
  assert.equal(first.index, 1);
  // A short buffer target brings the reservoir down to a quarter of it.
  assert.equal(multipath({ ladder: LADDER, bufferS: 0, segmentS: 2, bufferTargetS: 4, paths: [] }).reservoirS, 1);
});

test('without path figures it is the rate-based rule\'s estimate', () => {
  const past = [2, 2, 2].map((mbps, i) => download(mbps, i * 2000));
  for (const paths of [null, []]) {
    const decision = multipath({ ladder: LADDER, bufferS: 20, segmentS: 2, past, paths });
    assert.equal(decision.source, 'downloads');
    assert.equal(decision.estimateBps, 2 * M);
    assert.equal(decision.index, 1); // 0.85 × 2 = 1.7
    assert.equal(decision.freeBps, null);
  }
  assert.equal(multipath({ ladder: LADDER, bufferS: 0, segmentS: 2 }).index, 0);
});

test('bad input names the field', () => {
  assert.throws(() => multipath({ ladder: LADDER, bufferS: -1, segmentS: 2 }), /^RangeError: bufferS/);
  assert.throws(() => multipath({ ladder: LADDER, bufferS: 1, segmentS: 2, safety: 1.5 }), /^RangeError: safety/);
  assert.throws(() => multipath({ ladder: LADDER, bufferS: 1, segmentS: 2, paths: {} }), /^TypeError: paths/);
});

// The collector's answer for paths given as [path, delivery Mbit/s, bytes acked, extra].
const answer = (...figures) => ({
  measured: true,
  paths: figures.map(([n, mbps, acked, extra = {}]) => ({
    address: `10.1.${n}.2`, subflows: 1, delivery_bps: mbps * M, app_limited: false, rtt_ms: 20, bytes_acked: acked,
    backup: false, waiting_ms: 0, ...extra,
  })),
});

test('a path\'s rate is its best sample in the window or the rate its bytes grew at, whichever is higher', () => {
  const watch = new PathWatch();
  assert.equal(watch.snapshot(0), null); // nothing measured yet
  watch.seen({ measured: false, reason: 'no such connection' }, 0);
  assert.equal(watch.snapshot(0), null);
  watch.seen(answer([0, 3, 0], [1, 1, 0]), 0);
  // Path 0's sample at the end of a download is app-limited and low; path 1 carried 1 MB in a second.
  watch.seen(answer([0, 0.5, 1_000_000, { app_limited: true }], [1, 1, 1_000_000]), 1000);
  const [p0, p1] = watch.snapshot(1000);
  assert.deepEqual(p0, { address: '10.1.0.2', bps: 8 * M, held: false, spared: false, live: true });
  assert.equal(p1.bps, 8 * M);
  // Past the window, only the newest sample counts.
  watch.seen(answer([0, 0.5, 1_000_000], [1, 1, 1_000_000]), 1000 + PATH_WINDOW_MS + 1);
  assert.deepEqual(watch.snapshot(1000 + PATH_WINDOW_MS + 1).map((p) => p.bps), [0.5 * M, 1 * M]);
});

test('held is the backup mark now, spared the page\'s; data waiting long, or a path gone, is not live', () => {
  const watch = new PathWatch();
  watch.seen(answer([0, 2, 0], [1, 2, 0, { backup: true }]), 0, ['10.1.1.2']);
  assert.deepEqual(watch.snapshot(0).map((p) => [p.held, p.spared]), [[false, false], [true, true]]);
  watch.seen(answer([0, 2, 10], [1, 2, 10]), 500, ['10.1.1.2']); // the policy lets the path carry data
  assert.deepEqual(watch.snapshot(500)[1], { address: '10.1.1.2', bps: 2 * M, held: false, spared: true, live: true });
  watch.seen(answer([0, 2, 20], [1, 2, 10, { waiting_ms: FAILED_AFTER_MS }]), 1000);
  assert.equal(watch.snapshot(1000)[1].live, false);
  watch.seen(answer([0, 2, 30]), 1500); // path 1's subflow closed
  assert.equal(watch.snapshot(1500)[1].live, false);
  watch.seen(answer([0, 2, 40], [1, 2, 20, { waiting_ms: 900, rtt_ms: 400 }]), 2000); // 3 RTTs = 1.2 s
  assert.equal(watch.snapshot(2000)[1].live, true);
});

test('the engine hands the rule the paths, records them, and the decision replays', () => {
  const events = [];
  const engine = new AbrEngine({ name: 'multipath', emit: (d) => events.push(d) });
  assert.ok(engine.wantsPaths);
  assert.equal(new AbrEngine({ name: 'bba0', emit: () => {} }).wantsPaths, false);
  const first = engine.decide({ ladderBps: LADDER.map((r) => r.bitrate), bufferS: 0, segmentS: 2, nowMs: 0 });
  assert.equal(first.source, 'downloads'); // asked before the collector answered
  assert.equal(events[0].inputs.paths, null);
  engine.pathsSeen(answer([0, 2, 0], [1, 2, 0]), 100);
  engine.downloaded({ kind: 'video', bytes: 250_000, t_request: 0, t_done: 1000, duration_s: 2 });
  const second = engine.decide({ ladderBps: LADDER.map((r) => r.bitrate), bufferS: 10, segmentS: 2, nowMs: 200 });
  assert.equal(second.source, 'paths');
  assert.deepEqual(events[1].inputs.paths.map((p) => p.bps), [2 * M, 2 * M]);
  assert.equal(replayDecision(events[1]).index, second.index);
  // A rule that does not read the paths records none.
  const other = [];
  new AbrEngine({ name: 'rate-based', emit: (d) => other.push(d) }).decide({ ladderBps: [M], bufferS: 0 });
  assert.ok(!('paths' in other[0].inputs));
});

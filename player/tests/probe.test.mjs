// The probe's QoE rules, driven with a fake clock: startup split, stalls (and what is not a
// stall), quality switches, and the end record closing an open stall.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ladderOf } from '../src/adapters/common.js';
import { AbrEngine } from '../src/abr/engine.js';
import { QoeProbe } from '../src/probe/probe.js';
import { assertValidEvent } from './event-schema.mjs';

function harness() {
  const events = [];
  const clock = { t: 1000 };
  // Every event the probe emits must be one the collector accepts (seq as the sender adds it).
  const emit = (e) => {
    assertValidEvent({ seq: events.length, ...e });
    events.push(e);
  };
  const probe = new QoeProbe({ emit, now: () => clock.t });
  return { probe, events, clock, types: () => events.map((e) => e.type) };
}

const R360 = { bitrate: 400000, width: 640, height: 360, codec: 'avc1.64001e' };
const R720 = { bitrate: 1500000, width: 1280, height: 720, codec: 'avc1.64001f' };

function segment(probe, t_request, t_done, extra = {}) {
  probe.segmentLoaded({ url: `/s${t_request}.ts`, kind: 'muxed', bitrate: 400000, bytes: 50000,
    t_request, t_first_byte: t_request + 10, t_done, index: 0, duration_s: 2, ...extra });
}

test('startup delay splits into manifest, first segment and decode time that add up', () => {
  const { probe, events, clock } = harness();
  probe.playRequested(); // t = 1000
  probe.manifestLoaded({ url: '/m.m3u8', t_request: 1001, t_done: 1050, bytes: 300 });
  probe.manifestLoaded({ url: '/r0/index.m3u8', t_request: 1051, t_done: 1100, bytes: 900 });
  segment(probe, 1110, 1400);
  clock.t = 1500;
  probe.firstFrame(1480, R360);
  const startup = events.find((e) => e.type === 'startup');
  assert.equal(startup.t_ms, 1480);
  assert.equal(startup.data.startup_delay_ms, 480);
  assert.equal(startup.data.manifest_ms, 100);
  assert.equal(startup.data.first_segment_ms, 300);
  assert.equal(startup.data.decode_ms, 80);
  assert.equal(startup.data.manifest_ms + startup.data.first_segment_ms + startup.data.decode_ms, 480);
  assert.equal(startup.data.codec, 'avc1.64001e');
  assert.equal(startup.data.bitrate, 400000);
  probe.firstFrame(1600, R720);
  assert.equal(events.filter((e) => e.type === 'startup').length, 1, 'startup is recorded once');
});

test('a first frame stamped before its segment ended still splits into phases that add up', () => {
  // Resource Timing and the compositor are different clocks; a playback run saw the frame
  // 1.2 ms before the first segment's responseEnd, and decode time went below zero.
  const { probe, events } = harness();
  probe.playRequested(); // t = 1000
  probe.manifestLoaded({ url: '/m.mpd', t_request: 1001, t_done: 1040.3, bytes: 1 });
  segment(probe, 1050, 1284.6, { kind: 'video' });
  probe.firstFrame(1283.4, R360);
  const { data } = events.find((e) => e.type === 'startup');
  assert.equal(data.startup_delay_ms, 283.4);
  assert.equal(data.manifest_ms, 40.3);
  assert.equal(data.first_segment_ms, 243.1);
  assert.equal(data.decode_ms, 0);
  assert.ok(Math.abs(data.manifest_ms + data.first_segment_ms + data.decode_ms - data.startup_delay_ms) < 0.01);
});

test('init segments do not count as the first media segment', () => {
  const { probe, events } = harness();
  probe.playRequested();
  probe.manifestLoaded({ url: '/m.mpd', t_request: 1000, t_done: 1040, bytes: 1 });
  segment(probe, 1050, 1060, { kind: 'init', index: null, duration_s: null });
  segment(probe, 1070, 1300, { kind: 'video' });
  probe.firstFrame(1350, R360);
  const { data } = events.find((e) => e.type === 'startup');
  assert.equal(data.first_segment_ms, 260);
  assert.equal(data.decode_ms, 50);
});

test('a waiting with an empty buffer after startup is a stall with a duration', () => {
  const { probe, events, clock } = harness();
  probe.playRequested();
  assert.equal(probe.waiting({ position: 0, bufferAhead: 0 }), false, 'before startup: not a stall');
  probe.firstFrame(1100, R360);
  clock.t = 5000;
  assert.equal(probe.waiting({ position: 4, bufferAhead: 0.1, duration: 30 }), true);
  assert.equal(probe.waiting({ position: 4, bufferAhead: 0.1, duration: 30 }), false, 'already stalled');
  clock.t = 5600;
  assert.equal(probe.resumed({ position: 4.01 }), false, 'a nudge of the playhead is not playback');
  assert.equal(probe.resumed({ position: 4.05, tMs: 6250 }), true);
  const end = events.find((e) => e.type === 'stall_end');
  assert.deepEqual(events.find((e) => e.type === 'stall_start').data, { position: 4 });
  assert.equal(end.data.duration_ms, 1250);
  assert.equal(probe.stallCount, 1);
  assert.equal(probe.stallMs, 1250);
});

test('seeks, a full buffer and the end of the stream are not stalls', () => {
  const { probe, types } = harness();
  probe.playRequested();
  probe.firstFrame(1100, R360);
  assert.equal(probe.waiting({ position: 3, bufferAhead: 0, seeking: true, duration: 30 }), false);
  assert.equal(probe.waiting({ position: 3, bufferAhead: 5, duration: 30 }), false);
  assert.equal(probe.waiting({ position: 29.8, bufferAhead: 0, duration: 30 }), false);
  assert.ok(!types().includes('stall_start'));
});

test('a rendition change after startup is a quality switch; the first choice is not', () => {
  const { probe, events } = harness();
  probe.playRequested();
  probe.renditionRendered(R360);
  probe.firstFrame(1100, R360);
  probe.renditionRendered(R360);
  assert.equal(events.filter((e) => e.type === 'quality_switch').length, 0);
  probe.renditionRendered(R720);
  const sw = events.find((e) => e.type === 'quality_switch');
  assert.deepEqual(sw.data, { from_bitrate: 400000, to_bitrate: 1500000, width: 1280, height: 720, codec: 'avc1.64001f' });
});

test('the ladder is sent once, lowest rung first, without duplicates or empty rungs', () => {
  const { probe, events } = harness();
  probe.ladder(ladderOf([R720, { ...R360, codec: null }, R720, null, { bitrate: 0 }]));
  probe.ladder(ladderOf([R360]));
  const ladders = events.filter((e) => e.type === 'ladder');
  assert.equal(ladders.length, 1);
  assert.deepEqual(ladders[0].data.representations, [
    { bitrate: 400000, width: 640, height: 360, codec: '' },
    { bitrate: 1500000, width: 1280, height: 720, codec: 'avc1.64001f' },
  ]);
});

test('the rule the player runs is sent once; decisions of our rules go out with their inputs', () => {
  const { probe, events } = harness();
  probe.abr({ name: 'robustmpc', player_rules: ['MpstreamAbrRule'], params: { bufferTargetS: 30, horizon: 5, junk: null } });
  probe.abr({ name: 'bola' });
  assert.deepEqual(events.filter((e) => e.type === 'abr').map((e) => e.data),
    [{ name: 'robustmpc', player_rules: ['MpstreamAbrRule'], params: { bufferTargetS: 30, horizon: 5 } }]);
  const engine = new AbrEngine({ name: 'robustmpc', emit: (data) => probe.abrDecision(data) });
  for (let i = 0; i < 12; i += 1) {
    engine.decide({ ladderBps: [R360.bitrate, R720.bitrate], bufferS: i, segmentS: 2 });
    engine.downloaded(probe.segmentLoaded({ url: `/s${i}.m4s`, kind: 'video', bitrate: R360.bitrate, bytes: 90000 + i,
      t_request: 1000 * i, t_first_byte: 1000 * i + 5, t_done: 1000 * i + 400, index: i, duration_s: 2 }));
  }
  assert.equal(events.filter((e) => e.type === 'abr_decision').length, 12);
  assert.equal(probe.abrDecisions, 12);
});

test('an empty ladder is not sent', () => {
  const { probe, events } = harness();
  probe.ladder(ladderOf([]));
  assert.equal(events.length, 0);
  probe.ladder(ladderOf([R360]));
  assert.equal(events.filter((e) => e.type === 'ladder').length, 1);
});

test('the end record closes an open stall first and nothing follows it', () => {
  const { probe, types, clock, events } = harness();
  probe.playRequested();
  probe.firstFrame(1100, R360);
  clock.t = 2000;
  probe.waiting({ position: 1, bufferAhead: 0, duration: 30 });
  clock.t = 2600;
  probe.end({ reason: 'duration', position: 1 });
  probe.sample({ position: 1, bufferAhead: 0, droppedFrames: 0, totalFrames: 25 });
  probe.error({ message: 'late', fatal: false });
  assert.deepEqual(types().slice(-3), ['stall_start', 'stall_end', 'end']);
  assert.equal(events.at(-2).data.duration_ms, 600);
  assert.deepEqual(events.at(-1).data, { reason: 'duration', position: 1 });
  assert.equal(probe.end({ reason: 'closed', position: 1 }), false);
});

test('samples carry buffer level and frame counters; download rate follows from a segment', () => {
  const { probe, events } = harness();
  probe.playRequested();
  segment(probe, 1000, 1100); // 50000 bytes in 100 ms = 4 Mbit/s
  assert.equal(Math.round(probe.lastDownloadRate), 4000000);
  probe.firstFrame(1150, R360);
  probe.sample({ position: 2.5, bufferAhead: 7.25, droppedFrames: 3, totalFrames: 60 });
  assert.deepEqual(events.find((e) => e.type === 'buffer').data, { level_s: 7.25, position: 2.5 });
  assert.deepEqual(events.find((e) => e.type === 'playback').data, { position: 2.5, dropped_frames: 3, total_frames: 60 });
});

test('live latency samples carry the latency, the target and the playback rate', () => {
  const { probe, events } = harness();
  probe.liveLatency({ latency_s: 5.2346, target_s: 6, playback_rate: 1.25 });
  probe.liveLatency({ latency_s: NaN, target_s: 6 }); // not live yet: nothing recorded
  probe.liveLatency({ latency_s: -0.01, target_s: null });
  const samples = events.filter((e) => e.type === 'live_latency').map((e) => e.data);
  assert.deepEqual(samples, [
    { latency_s: 5.235, target_s: 6, playback_rate: 1.25 },
    { latency_s: 0, target_s: null, playback_rate: 1 },
  ]);
  probe.end({ reason: 'duration', position: 3 });
  probe.liveLatency({ latency_s: 4, target_s: 6 });
  assert.equal(events.filter((e) => e.type === 'live_latency').length, 2, 'nothing after the end');
});

test("startup names the first segment's rendition, not the one the player downloads next", () => {
  // dash.js's current representation is the one it is downloading: by the first frame it may
  // already be the next segment's, higher rung.
  const { probe, events } = harness();
  probe.playRequested();
  probe.ladder(ladderOf([R360, R720]));
  probe.manifestLoaded({ url: '/m.mpd', t_request: 1001, t_done: 1040, bytes: 1 });
  segment(probe, 1050, 1200, { kind: 'video', bitrate: R360.bitrate });
  probe.firstFrame(1250, R720);
  const { data } = events.find((e) => e.type === 'startup');
  assert.equal(data.bitrate, R360.bitrate);
  assert.equal(data.height, 360);
  probe.renditionRendered(R360); // the player then says the 360p is on screen: no switch
  assert.equal(events.filter((e) => e.type === 'quality_switch').length, 0);
  probe.renditionRendered(R720);
  assert.deepEqual(events.filter((e) => e.type === 'quality_switch').map((e) => e.data.from_bitrate), [R360.bitrate]);
});

test('a first segment of a bitrate off the ladder leaves the rendition the player gave', () => {
  const { probe, events } = harness();
  probe.playRequested();
  probe.ladder(ladderOf([R720]));
  segment(probe, 1050, 1200, { kind: 'video', bitrate: 123 });
  probe.firstFrame(1250, R720);
  assert.equal(events.find((e) => e.type === 'startup').data.bitrate, R720.bitrate);
});

// The schema check itself: it accepts what the collector accepts and refuses what it refuses,
// so the probe tests' checks (probe.test.mjs) can fail.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertValidBatch, assertValidEvent, assertValidSession } from './event-schema.mjs';

const SWITCH = { seq: 3, t_ms: 1200.5, type: 'quality_switch',
  data: { from_bitrate: 400000, to_bitrate: 1500000, width: 1280, height: 720, codec: 'avc1.64001f' } };

test('a well-formed event, session and batch pass', () => {
  assertValidEvent(SWITCH);
  assertValidBatch({ events: [SWITCH, { seq: 4, t_ms: 1300, type: 'stall_start', data: { position: 2.5 } }] });
  assertValidSession({ id: 's-1', player: 'dashjs', player_version: '5.2.1', protocol: 'dash',
    manifest: 'http://10.0.0.1/media/dash/manifest.mpd', scenario: null, trial: null,
    transport: 'mptcp', user_agent: 'x', started_at: '2026-01-31T12:00:00Z' });
});

test('events the collector refuses fail the check, naming the field', () => {
  const bad = [
    [{ ...SWITCH, type: 'rebuffer' }, /type|discriminator|tag/],
    [{ ...SWITCH, data: { ...SWITCH.data, to_bitrate: '1500000' } }, /to_bitrate/],
    [{ ...SWITCH, data: { ...SWITCH.data, extra: 1 } }, /additional/],
    [{ ...SWITCH, t_ms: -1 }, /t_ms/],
    [{ t_ms: 1, type: 'buffer', data: { level_s: 1, position: 1 } }, /seq/],
  ];
  for (const [event, why] of bad) {
    assert.throws(() => assertValidEvent(event), why, JSON.stringify(event));
  }
});

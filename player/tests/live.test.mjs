// A live stream's settings for hls.js and dash.js from the page's parameters.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { catchupBufferFloor, catchupRate, dashLiveSettings, hlsCatchup, hlsLiveSettings } from '../src/adapters/live.js';
import { parseParams } from '../src/probe/params.js';

const none = { targetLatency: null, catchupMaxRate: null, catchupMinRate: null, maxDrift: null };

test('without live parameters each library keeps its own defaults', () => {
  assert.deepEqual(hlsLiveSettings(none), {});
  assert.equal(hlsCatchup(none), null);
  assert.deepEqual(dashLiveSettings(none), {});
});

test("a target alone gets the page's catch-up defaults, as before", () => {
  assert.deepEqual(hlsLiveSettings({ ...none, targetLatency: 2 }), {
    liveSyncDuration: 2, liveMaxLatencyDuration: 6, maxLiveSyncPlaybackRate: 1,
  });
  assert.deepEqual(hlsCatchup({ ...none, targetLatency: 2 }), { maxRate: 1.25, minRate: 0.75 });
  assert.deepEqual(dashLiveSettings({ ...none, targetLatency: 2 }), {
    delay: { liveDelay: 2, useSuggestedPresentationDelay: false },
    liveCatchup: { enabled: true, maxDrift: 6, playbackRate: { min: -0.25, max: 0.25 } },
  });
});

test('the catch-up parameters reach both libraries', () => {
  const config = parseParams('?target_latency=0.7&catchup_max_rate=1.1&catchup_min_rate=0.9&max_drift=1.5').config;
  assert.deepEqual(hlsLiveSettings(config), {
    liveSyncDuration: 0.7, liveMaxLatencyDuration: 2.2, maxLiveSyncPlaybackRate: 1,
  });
  assert.deepEqual(hlsCatchup(config), { maxRate: 1.1, minRate: 0.9 });
  const dash = dashLiveSettings(config);
  assert.equal(dash.liveCatchup.maxDrift, 1.5);
  assert.ok(Math.abs(dash.liveCatchup.playbackRate.max - 0.1) < 1e-9);
  assert.ok(Math.abs(dash.liveCatchup.playbackRate.min + 0.1) < 1e-9);
});

test('catch-up parameters out of range are refused by name', () => {
  for (const bad of ['catchup_max_rate=0.9', 'catchup_max_rate=5', 'catchup_min_rate=0', 'catchup_min_rate=1.2', 'max_drift=-1']) {
    const { config, errors } = parseParams(`?${bad}`);
    assert.equal(errors.length, 1, bad);
    assert.ok(errors[0].startsWith(bad.split('=')[0]), errors[0]);
    assert.equal(config[{ catchup_max_rate: 'catchupMaxRate', catchup_min_rate: 'catchupMinRate', max_drift: 'maxDrift' }[bad.split('=')[0]]], null);
  }
});

const held = { target: 1.0, floor: 0.4, maxRate: 1.25, minRate: 0.75 };

test('hls.js is sped up a part behind a 1 s target with under a second buffered', () => {
  // hls.js's own controller stays at 1 here: it asks for more than 1 s ahead.
  const rate = catchupRate({ ...held, latency: 1.2, ahead: 0.8 });
  assert.ok(rate > 1.1 && rate <= 1.25, `${rate}`);
  assert.equal(catchupRate({ ...held, latency: 3.0, ahead: 2.5 }), 1.25);
});

test('the page plays hls.js slower ahead of the target and at 1 within the margin', () => {
  assert.equal(catchupRate({ ...held, latency: 1.03, ahead: 0.8 }), 1);
  assert.equal(catchupRate({ ...held, latency: 0.97, ahead: 0.8 }), 1);
  const slow = catchupRate({ ...held, latency: 0.7, ahead: 0.5 });
  assert.ok(slow < 0.9 && slow >= 0.75, `${slow}`);
});

test('without buffer to spend the page does not speed up', () => {
  assert.equal(catchupRate({ ...held, latency: 1.5, ahead: 0.3 }), 1);
});

test('the buffer floor is two parts, at most a second', () => {
  assert.equal(catchupBufferFloor({ partTarget: 0.2, targetduration: 2 }), 0.4);
  assert.equal(catchupBufferFloor({ partTarget: 0.5, targetduration: 2 }), 1);
  assert.equal(catchupBufferFloor({ partTarget: 0, targetduration: 4 }), 1);
});

// A live stream's settings for hls.js and dash.js from the page's parameters.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dashLiveSettings, hlsLiveSettings } from '../src/adapters/live.js';
import { parseParams } from '../src/probe/params.js';

const none = { targetLatency: null, catchupMaxRate: null, catchupMinRate: null, maxDrift: null };

test('without live parameters each library keeps its own defaults', () => {
  assert.deepEqual(hlsLiveSettings(none), {});
  assert.deepEqual(dashLiveSettings(none), {});
});

test("a target alone gets the page's catch-up defaults, as before", () => {
  assert.deepEqual(hlsLiveSettings({ ...none, targetLatency: 2 }), {
    liveSyncDuration: 2, liveMaxLatencyDuration: 6, maxLiveSyncPlaybackRate: 1.25,
  });
  assert.deepEqual(dashLiveSettings({ ...none, targetLatency: 2 }), {
    delay: { liveDelay: 2, useSuggestedPresentationDelay: false },
    liveCatchup: { enabled: true, maxDrift: 6, playbackRate: { min: -0.25, max: 0.25 } },
  });
});

test('the catch-up parameters reach both libraries', () => {
  const config = parseParams('?target_latency=0.7&catchup_max_rate=1.1&catchup_min_rate=0.9&max_drift=1.5').config;
  assert.deepEqual(hlsLiveSettings(config), {
    liveSyncDuration: 0.7, liveMaxLatencyDuration: 2.2, maxLiveSyncPlaybackRate: 1.1,
  });
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

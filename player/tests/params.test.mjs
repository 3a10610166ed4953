import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OUR_RULES } from '../src/abr/engine.js';
import { parseParams } from '../src/probe/params.js';
import { pathsUrlOf } from '../src/session/paths.js';
import { transportText } from '../src/session/transport.js';

test('all parameters are read', () => {
  const { config, errors } = parseParams('?src=/media/dash/manifest.mpd&player=dashjs&session=s_1&scenario=bal&trial=2&transport=mptcp&collector=/api/v1/&duration=25');
  assert.equal(parseParams('?buffer=4').config.buffer, 4);
  assert.equal(parseParams('?report_timeout=2.5').config.reportTimeout, 2.5);
  assert.deepEqual(parseParams('?report_timeout=0').errors.length, 1);
  assert.deepEqual(errors, []);
  assert.deepEqual(config, { src: '/media/dash/manifest.mpd', player: 'dashjs', session: 's_1', scenario: 'bal', trial: 2, transport: 'mptcp', seenBy: 'server', codec: 'auto', collector: '/api/v1', duration: 25, startupTimeout: 30, reportTimeout: 15, buffer: null, targetLatency: null, catchupMaxRate: null, catchupMinRate: null, maxDrift: null, abr: 'dynamic', abrParams: {}, spared: [], pathsUrl: null });
});

test('the player follows the manifest when not given, and defaults fill in', () => {
  assert.equal(parseParams('?src=/x/master.m3u8').config.player, 'hlsjs');
  const { config } = parseParams('');
  assert.equal(config.player, 'dashjs');
  assert.equal(config.src, '/media/dash/manifest.mpd');
  assert.match(config.session, /^web-[0-9a-f]{16}$/);
  assert.equal(config.transport, 'unknown');
  assert.equal(config.duration, null);
});

test('the server tells the transport unless a carrier beside the browser does', () => {
  const seenBy = (query) => parseParams(query).config.seenBy;
  assert.deepEqual([seenBy(''), seenBy('?transport=mpquic&seen_by=carrier'), seenBy('?seen_by=x')], ['server', 'carrier', 'server']);
  assert.deepEqual(parseParams('?seen_by=x').errors, ['seen_by=x: must be one of server, carrier']);
});

test('the paths a policy spares are the client\'s addresses on them', () => {
  assert.deepEqual(parseParams('?spared=10.1.1.2').config.spared, ['10.1.1.2']);
  assert.deepEqual(parseParams('?spared=10.1.1.2,fd00::2').config.spared, ['10.1.1.2', 'fd00::2']);
  assert.deepEqual(parseParams('?spared=10.1.1.2,x,y').errors,
    ["spared=10.1.1.2,x,y: must be the client's addresses of the paths, separated by commas (e.g. 10.1.1.2)"]);
});

test('the paths come from the collector, from a carrier that has them, or from nowhere', () => {
  const from = (query) => pathsUrlOf(parseParams(query).config);
  assert.equal(from('?session=s1'), '/api/v1/sessions/s1/paths');
  assert.equal(from('?session=s1&seen_by=carrier'), null);
  const carrier = 'http://127.0.0.1:8081/.well-known/mpstream/paths';
  assert.equal(from(`?session=s1&seen_by=carrier&paths_url=${encodeURIComponent(carrier)}`), carrier);
  assert.deepEqual(parseParams('?paths_url=javascript:x').errors,
    ["paths_url=javascript:x: must be an http(s) URL or a path on the page's server (e.g. http://127.0.0.1:8081/.well-known/mpstream/paths)"]);
});

test('the HUD shows what the server measured, never the unknown label', () => {
  assert.equal(transportText({ measured: true, label: 'MPTCP, 2 subflows' }, 'unknown'), 'MPTCP, 2 subflows');
  assert.equal(transportText({ measured: false, reason: 'no such connection' }, 'unknown'), 'not measured: no such connection');
  assert.equal(transportText(null, 'mptcp'), 'MPTCP asked; not measured: no answer from the collector');
});

test('codec is auto unless avc or hevc is asked for', () => {
  assert.equal(parseParams('?codec=hevc').config.codec, 'hevc');
  assert.equal(parseParams('?codec=avc').config.codec, 'avc');
  const { config, errors } = parseParams('?codec=vp9');
  assert.equal(config.codec, 'auto');
  assert.deepEqual(errors, ['codec=vp9: must be one of auto, avc, hevc']);
});

test('bad parameters are named', () => {
  const { errors } = parseParams('?player=vlc&session=a%20b&trial=-1&transport=QUIC!&duration=0');
  assert.equal(errors.length, 5);
  for (const name of ['player=vlc', 'session=a b', 'trial=-1', 'transport=QUIC!', 'duration=0']) {
    assert.ok(errors.some((e) => e.startsWith(name)), name);
  }
});

test('a live target latency is a number of seconds', () => {
  assert.equal(parseParams('?target_latency=6').config.targetLatency, 6);
  assert.equal(parseParams('?target_latency=1.5').config.targetLatency, 1.5);
  const { config, errors } = parseParams('?target_latency=-2');
  assert.equal(config.targetLatency, null);
  assert.match(errors[0], /^target_latency=-2: must be a number of seconds greater than 0/);
});

test("abr is the player's default unless a rule it supports is named, with that rule's parameters", () => {
  assert.equal(parseParams('?player=hlsjs').config.abr, 'ewma');
  assert.equal(parseParams('?player=dashjs&abr=bola').config.abr, 'bola');
  const mpc = parseParams('?player=hlsjs&abr=robustmpc&abr_param=horizon=3&abr_param=lambda=0.5');
  assert.deepEqual(mpc.errors, []);
  assert.deepEqual(mpc.config.abrParams, { horizon: 3, lambda: 0.5 });
  const { config, errors } = parseParams('?player=hlsjs&abr=bola');
  assert.equal(config.abr, 'ewma');
  assert.deepEqual(errors, [`abr=bola: hlsjs supports ${['ewma', ...OUR_RULES].join(', ')}`]);
  const bad = parseParams('?player=dashjs&abr=bba0&abr_param=horizon=3&abr_param=cushionS=x&abr_param=reservoirS');
  assert.equal(bad.errors.length, 3);
  assert.match(bad.errors[0], /^abr_param=horizon=3: give KEY=VALUE with KEY one of bba0's parameters \(reservoirS, cushionS\)/);
  assert.match(bad.errors[1], /^abr_param=cushionS=x: the value must be a number/);
  assert.match(bad.errors[2], /^abr_param=reservoirS: give KEY=VALUE/);
});

// Helpers the adapters share (the adapters themselves run in Chromium in the e2e tests).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { codecFamily, codecProblem, pageClock, stripCmcd } from '../src/adapters/common.js';

test('stripCmcd removes the CMCD argument and nothing else', () => {
  assert.equal(
    stripCmcd('http://h:8080/media/dash/avc-360p/seg_00001.m4s?CMCD=bl%3D2000%2Csid%3D%22s1%22'),
    'http://h:8080/media/dash/avc-360p/seg_00001.m4s',
  );
  assert.equal(stripCmcd('http://h/x.ts?a=1&CMCD=ot%3Dv&b=2'), 'http://h/x.ts?a=1&b=2');
  assert.equal(stripCmcd('http://h/x.ts?a=1'), 'http://h/x.ts?a=1', 'untouched without CMCD');
  assert.equal(stripCmcd(null), null);
});

test('pageClock puts a wall-clock Date on the performance.now() clock', () => {
  const now = performance.now();
  const date = new Date(performance.timeOrigin + now);
  assert.ok(Math.abs(pageClock(date) - now) < 1);
  assert.equal(pageClock(null), null);
});

test('codecFamily names the video codec family of a codecs string', () => {
  assert.equal(codecFamily('avc1.64001f'), 'avc');
  assert.equal(codecFamily('avc3.42E01E'), 'avc');
  assert.equal(codecFamily('hvc1.1.6.L93.90'), 'hevc');
  assert.equal(codecFamily('hev1.1.6.L120.90'), 'hevc');
  assert.equal(codecFamily('mp4a.40.2'), null);
  assert.equal(codecFamily(undefined), null);
});

test('codecProblem says why a codec family cannot play, or null', () => {
  const support = { 'avc1.64001f': true, 'hvc1.1.6.L93.90': false, 'mp4a.40.2': true };
  assert.equal(codecProblem('avc', support), null);
  assert.match(codecProblem('hevc', support), /cannot decode hvc1\.1\.6\.L93\.90/);
  assert.equal(codecProblem('hevc', { ...support, 'hvc1.1.6.L93.90': true }), null);
  assert.match(codecProblem('hevc', { 'avc1.64001f': true }, 'HLS master playlist'),
    /the HLS master playlist has no hevc rendition \(video codecs: avc1\.64001f\)/);
});

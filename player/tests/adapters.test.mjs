// Helpers the adapters share (the adapters themselves run in Chromium in the e2e tests).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pageClock, stripCmcd } from '../src/adapters/common.js';

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

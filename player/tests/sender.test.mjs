// The sender against a scripted collector: batching, retries while the collector is down,
// nothing lost, seq numbering that survives a reload (persistent queue), beacons.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventSender, MAX_BATCH_EVENTS, splitBatches } from '../src/probe/sender.js';

const SESSION = { id: 'unit-1', player: 'hlsjs' };

class MemoryStorage {
  constructor() { this.items = new Map(); }
  getItem(k) { return this.items.has(k) ? this.items.get(k) : null; }
  setItem(k, v) { this.items.set(k, String(v)); }
}

/** A collector that stores events by seq (as the real one does) and can be switched off. */
function fakeCollector() {
  const state = { up: true, status: 502, sessions: 0, stored: new Map(), posts: 0 };
  state.fetch = async (url, init) => {
    state.posts += 1;
    if (!state.up) {
      if (state.status === 0) throw new TypeError('Failed to fetch');
      return new Response('bad gateway', { status: state.status });
    }
    const body = JSON.parse(init.body);
    if (url.endsWith('/sessions')) {
      state.sessions += 1;
      return new Response('{}', { status: 201 });
    }
    for (const e of body.events) state.stored.set(e.seq, e);
    return new Response('{}', { status: 200 });
  };
  return state;
}

function sender(collector, extra = {}) {
  return new EventSender({ collector: '/api/v1', session: SESSION, fetch: collector.fetch,
    flushIntervalMs: 5, retryBaseMs: 5, retryMaxMs: 20, ...extra });
}

const ev = (i) => ({ t_ms: i, type: 'buffer', data: { level_s: i, position: i } });

test('events are numbered from 0 and delivered once the session exists', async () => {
  const c = fakeCollector();
  const s = sender(c);
  for (let i = 0; i < 5; i += 1) s.push(ev(i));
  assert.equal(await s.drain(2000), 0);
  assert.equal(c.sessions, 1);
  assert.deepEqual([...c.stored.keys()].sort((a, b) => a - b), [0, 1, 2, 3, 4]);
});

for (const [label, status] of [['answers 502', 502], ['is unreachable', 0]]) {
  test(`nothing is lost while the collector ${label}`, async () => {
    const c = fakeCollector();
    const s = sender(c);
    s.push(ev(0));
    assert.equal(await s.drain(1000), 0);
    c.up = false;
    c.status = status;
    for (let i = 1; i < 40; i += 1) s.push(ev(i));
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(s.pending > 0 && s.failures > 0, 'events wait while it is down');
    assert.ok(s.lastError);
    c.up = true;
    assert.equal(await s.drain(3000), 0);
    assert.equal(c.stored.size, 40);
  });
}

test('a reloaded page resends the stored queue and keeps numbering', async () => {
  const c = fakeCollector();
  c.up = false;
  const storage = new MemoryStorage();
  const first = sender(c, { storage });
  for (let i = 0; i < 3; i += 1) first.push(ev(i));
  first.stopped = true; // the page goes away before anything was acknowledged
  const second = sender(c, { storage });
  assert.equal(second.pending, 3);
  second.push(ev(3));
  assert.equal(second.queue.at(-1).seq, 3);
  c.up = true;
  assert.equal(await second.drain(2000), 0);
  assert.deepEqual([...c.stored.keys()].sort(), [0, 1, 2, 3]);
});

test('a batch the collector rejects (400) is set aside, later ones still go', async () => {
  const c = fakeCollector();
  let rejectOnce = true;
  const fetch = async (url, init) => {
    if (url.endsWith('/events') && rejectOnce) {
      rejectOnce = false;
      return new Response('{"error":"bad"}', { status: 400 });
    }
    return c.fetch(url, init);
  };
  const s = sender(c, { fetch });
  s.push(ev(0));
  await s.drain(500);
  s.push(ev(1));
  assert.equal(await s.drain(1000), 0);
  assert.equal(s.rejected.length, 1);
  assert.ok(c.stored.has(1));
});

test('batches respect the count and size limits', () => {
  const events = Array.from({ length: 1234 }, (_, i) => ({ seq: i, t_ms: i, type: 'buffer', data: { level_s: 1, position: 1 } }));
  const byCount = splitBatches(events, MAX_BATCH_EVENTS, 1 << 30);
  assert.deepEqual(byCount.map((b) => b.length), [500, 500, 234]);
  const bySize = splitBatches(events, 10000, 4096);
  assert.ok(bySize.every((b) => JSON.stringify(b).length <= 4096 + b.length));
  assert.equal(bySize.flat().length, 1234);
});

test('beaconFlush posts the session and every queued event in beacon-sized chunks', () => {
  const c = fakeCollector();
  const beacons = [];
  const s = sender(c, { beacon: (url, blob) => { beacons.push({ url, size: blob.size }); return true; } });
  s.stopped = true; // no timers: only the beacon path
  for (let i = 0; i < 1500; i += 1) s.push(ev(i));
  assert.equal(s.beaconFlush(), true);
  assert.equal(beacons[0].url, '/api/v1/sessions');
  assert.ok(beacons.length > 2);
  assert.ok(beacons.every((b) => b.size <= 60 * 1024));
  assert.equal(s.pending, 1500, 'beaconed events stay queued until acknowledged');
});

test('a startup record is sent at once, not on the next flush', () => {
  const timers = [];
  const s = sender(fakeCollector(), {
    flushIntervalMs: 60_000,
    setTimeout: (fn, ms) => timers.push({ fn, ms, cleared: false }) - 1,
    clearTimeout: (id) => { timers[id].cleared = true; },
  });
  s.push(ev(0)); // waits for the minute-long flush ...
  assert.deepEqual(timers.map((t) => [t.ms, t.cleared]), [[60_000, false]]);
  s.push({ t_ms: 1, type: 'startup', data: {} }); // ... until a startup record comes
  assert.deepEqual(timers.map((t) => [t.ms, t.cleared]), [[60_000, true], [0, false]]);
});

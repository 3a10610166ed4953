// The step before the play request: the page's own requests to the collector are answered
// before the manifest is asked for, and a collector that does not answer delays the start by a
// bounded time only.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventSender } from '../src/probe/sender.js';
import { collectorReady } from '../src/session/start.js';

function collector({ answers = true } = {}) {
  const state = { inFlight: 0, created: 0 };
  state.fetch = (url, init = {}) => {
    state.inFlight += 1;
    if (!answers) {
      // Hangs until the sender's own timeout aborts it.
      return new Promise((_, reject) => {
        if (init.signal) init.signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' })));
      });
    }
    return new Promise((resolve) => {
      setTimeout(() => {
        state.inFlight -= 1;
        if (url.endsWith('/sessions')) state.created += 1;
        resolve({ ok: true, status: 200, json: async () => ({}), text: async () => '' });
      }, 15);
    });
  };
  return state;
}

function sessionWith(state) {
  const sender = new EventSender({ collector: '/api/v1', session: { id: 's-1' }, fetch: state.fetch, requestTimeoutMs: 100 });
  return { sender };
}

test('the session record and the transport answer are in before the play request', async () => {
  const state = collector();
  const session = sessionWith(state);
  const transportAsked = state.fetch('/api/v1/sessions/s-1/transport');
  await collectorReady(session, transportAsked, 5000);
  assert.equal(state.created, 1);
  assert.equal(state.inFlight, 0, 'a collector request still holds a connection at the play request');
  assert.equal(session.sender.sessionCreated, true);
});

test('a collector that does not answer holds the play request for the bound only', async () => {
  const state = collector({ answers: false });
  const session = sessionWith(state);
  const t0 = Date.now();
  await collectorReady(session, state.fetch('/api/v1/sessions/s-1/transport'), 50);
  const waited = Date.now() - t0;
  assert.ok(waited >= 45 && waited < 1000, `waited ${waited} ms`);
  assert.equal(session.sender.sessionCreated, false);
  session.sender.stopped = true; // no retries left behind the test
});

// The per-request XHR loader put in place of dash.js's own (src/adapters/dashjs-xhr.js); in the
// browser it loads every dash.js segment in the e2e tests.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseHeaders, perRequestXhrLoader } from '../src/adapters/dashjs-xhr.js';

/** An XMLHttpRequest that records what was asked of it and ends when told to. */
class FakeXhr extends EventTarget {
  static made = [];

  constructor() {
    super();
    this.headers = {};
    this.aborted = false;
    FakeXhr.made.push(this);
  }
  open(method, url, async) { Object.assign(this, { method, url, async }); }
  setRequestHeader(name, value) { this.headers[name] = value; }
  send(body) { this.sent = body; }
  abort() { this.aborted = true; }
  getAllResponseHeaders() { return 'Content-Type: video/mp4\r\nContent-Length: 7\r\n'; }
  finish() {
    Object.assign(this, { responseURL: this.url, status: 200, statusText: 'OK', response: 'payload' });
    if (this.onload) this.onload();
    if (this.onloadend) this.onloadend();
    this.dispatchEvent(new Event('loadend'));
  }
}

function request(url, ended) {
  return { method: 'GET', url, responseType: 'arraybuffer', headers: { Range: 'bytes=0-99', Empty: '' },
    customData: { onloadend: () => ended.push(url) } };
}

test("a request's abort cancels that request, not the one started after it", () => {
  FakeXhr.made = [];
  const ended = [];
  const loader = perRequestXhrLoader(FakeXhr);
  const segment = request('/dash/avc-360p/seg_00001.m4s', ended);
  const init = request('/dash/avc-144p/init.mp4', ended);
  loader.load(segment, {});
  loader.load(init, {});
  const [segmentXhr, initXhr] = FakeXhr.made;
  segment.customData.abort();
  assert.equal(segmentXhr.aborted, true, 'the slow segment is cancelled');
  assert.equal(initXhr.aborted, false, 'the init segment loads on');
  assert.equal(segmentXhr.onloadend, null, 'an aborted request does not report an end');
  const response = {};
  loader.load(request('/x', ended), response);
  FakeXhr.made[2].finish();
  initXhr.finish();
  assert.deepEqual(ended, ['/x', '/dash/avc-144p/init.mp4']);
  assert.equal(response.status, 200);
  assert.equal(response.data, 'payload');
  assert.deepEqual(response.headers, { 'Content-Type': 'video/mp4', 'Content-Length': '7' });
  assert.equal(loader.getXhr(), FakeXhr.made[2]);
});

test('the request is sent as dash.js describes it', () => {
  FakeXhr.made = [];
  const loader = perRequestXhrLoader(FakeXhr);
  loader.load({ ...request('/seg', []), credentials: 'include', timeout: 5000 }, {});
  const [xhr] = FakeXhr.made;
  assert.deepEqual([xhr.method, xhr.url, xhr.async], ['GET', '/seg', true]);
  assert.deepEqual(xhr.headers, { Range: 'bytes=0-99' }, 'empty headers are left out');
  assert.equal(xhr.responseType, 'arraybuffer');
  assert.equal(xhr.withCredentials, true);
  assert.equal(xhr.timeout, 5000);
  assert.equal(xhr.sent, null);
});

test('reset and a bare abort cancel every request in flight, and only those', () => {
  FakeXhr.made = [];
  const loader = perRequestXhrLoader(FakeXhr);
  for (const url of ['/a', '/b', '/c']) loader.load(request(url, []), {});
  const [a, b, c] = FakeXhr.made;
  a.finish();
  loader.abort();
  assert.deepEqual([a.aborted, b.aborted, c.aborted], [false, true, true]);
  loader.load(request('/d', []), {});
  loader.reset();
  assert.equal(FakeXhr.made[3].aborted, true);
  loader.load(request('/f', []), {});
  loader.abort(request('/e', [])); // not this loader's: nothing else is touched
  assert.equal(FakeXhr.made[4].aborted, false);
});

test('a request loaded again cancels its open XHR, and its abort then cancels the new one', () => {
  FakeXhr.made = [];
  const ended = [];
  const loader = perRequestXhrLoader(FakeXhr);
  const segment = request('/dash/avc-360p/seg_00002.m4s', ended);
  loader.load(segment, {});
  loader.load(segment, {});
  const [first, again] = FakeXhr.made;
  assert.equal(first.aborted, true, 'the first XHR would end into the same callbacks');
  assert.equal(again.aborted, false);
  first.dispatchEvent(new Event('loadend')); // late: it must not forget the new XHR
  segment.customData.abort();
  assert.equal(again.aborted, true);
  // A retry after the first ended: nothing left open to cancel, the retry loads.
  const retried = request('/dash/avc-360p/seg_00003.m4s', ended);
  loader.load(retried, {});
  FakeXhr.made[2].finish();
  loader.load(retried, {});
  assert.equal(FakeXhr.made[3].aborted, false);
  FakeXhr.made[3].finish();
  assert.deepEqual(ended, ['/dash/avc-360p/seg_00003.m4s', '/dash/avc-360p/seg_00003.m4s']);
});

test('parseHeaders keeps names as given and values whole', () => {
  assert.deepEqual(parseHeaders('A: 1\r\nDate: Sat, 28 Nov 2026 10:00:00 GMT\r\n'),
    { A: '1', Date: 'Sat, 28 Nov 2026 10:00:00 GMT' });
  assert.deepEqual(parseHeaders(''), {});
  assert.deepEqual(parseHeaders(null), {});
});

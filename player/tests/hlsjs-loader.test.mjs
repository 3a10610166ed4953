// hls.js's own XhrLoader with abandoned parts let finish (src/adapters/hlsjs-loader.js): a part
// hls.js aborts is not cancelled and never reports again; a whole segment still is.
import assert from 'node:assert/strict';
import { test } from 'node:test';

/** An XMLHttpRequest that records what was asked of it and moves through its states when told. */
class FakeXhr {
  static made = [];

  constructor() {
    this.readyState = 0;
    this.aborted = false;
    FakeXhr.made.push(this);
  }
  open(method, url) { Object.assign(this, { method, url, readyState: 1 }); }
  setRequestHeader() {}
  send() { this.sent = true; }
  abort() { this.aborted = true; this.readyState = 4; }
  getResponseHeader() { return null; }
  getAllResponseHeaders() { return ''; }
  move(state) {
    Object.assign(this, { readyState: state, status: 200, response: new ArrayBuffer(8), responseURL: this.url });
    if (this.onreadystatechange) this.onreadystatechange();
  }
}

globalThis.self = globalThis;
globalThis.XMLHttpRequest = FakeXhr;
const { default: Hls } = await import('hls.js');
const { partKeepingLoader } = await import('../src/adapters/hlsjs-loader.js');

function load(part, onDetach) {
  const Loader = partKeepingLoader(Hls.DefaultConfig.loader, onDetach);
  const loader = new Loader(Hls.DefaultConfig);
  const heard = [];
  const callbacks = {
    onSuccess: () => heard.push('success'), onError: () => heard.push('error'),
    onTimeout: () => heard.push('timeout'), onAbort: () => heard.push('abort'),
  };
  const policy = { maxTimeToFirstByteMs: 10000, maxLoadTimeMs: 20000, timeoutRetry: null, errorRetry: null };
  loader.load({ url: part ? '/dash/T-0-00007.p2.m4s' : '/dash/T-0-00007.m4s', responseType: 'arraybuffer', part },
    { loadPolicy: policy, maxRetry: 0, retryDelay: 0, maxRetryDelay: 0, timeout: 10000 }, callbacks);
  return { loader, heard, xhr: FakeXhr.made.at(-1) };
}

test('an abandoned part finishes on its own and hls.js never hears from it again', () => {
  let detached = 0;
  const { loader, heard, xhr } = load({ index: 2 }, () => { detached += 1; });
  xhr.move(3); // its bytes are arriving
  loader.abort();
  assert.deepEqual(heard, ['abort'], 'hls.js is told of the abort as before');
  assert.equal(xhr.aborted, false, 'the request is not cancelled: its connection stays open');
  assert.equal(loader.stats.aborted, true);
  assert.equal(detached, 1);
  xhr.move(4);
  assert.deepEqual(heard, ['abort'], 'the finished part is not reported');
  loader.destroy();
  assert.equal(xhr.aborted, false);
});

test('a part asked for but not answered yet is let finish too', () => {
  const { loader, heard, xhr } = load({ index: 0 });
  assert.equal(xhr.readyState, 1);
  loader.abort();
  assert.equal(xhr.aborted, false);
  assert.deepEqual(heard, ['abort']);
});

test('an abandoned whole segment is cancelled, as hls.js does', () => {
  let detached = 0;
  const { loader, heard, xhr } = load(null, () => { detached += 1; });
  xhr.move(3);
  loader.abort();
  assert.equal(xhr.aborted, true, 'the rest of a segment would take the path from a lower rung');
  assert.deepEqual(heard, ['abort']);
  assert.equal(detached, 0);
});

test('a part that has finished is not touched by a late abort', () => {
  const { loader, heard, xhr } = load({ index: 1 });
  xhr.move(4);
  assert.deepEqual(heard, ['success']);
  loader.abort();
  assert.equal(xhr.aborted, false);
});

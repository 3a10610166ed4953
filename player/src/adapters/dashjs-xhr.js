// dash.js's own XHRLoader (5.2.1) keeps one XMLHttpRequest per loader, and the abort it hands
// each request cancels whichever request that loader started last. When a switch down starts
// the new rendition's init segment before the slow media segment is aborted (an abandoned
// download while players share a bottleneck), the init request is "aborted" instead and the old
// rendition's segment arrives and is appended after the new init segment: Chromium decodes it
// with the wrong parameter sets and the session ends in a demuxer error. This loader, put in
// its place with `player.extend`, keeps one XMLHttpRequest per request, so an abort cancels the
// request it was made for. Its shape (load, abort, getXhr, reset, resetInitialSettings) is the
// one dash.js's HTTPLoader calls.

/** Cancels `xhr` without its end callbacks: dash.js's loader reports an abort itself. */
function cancel(xhr) {
  xhr.onloadend = xhr.onerror = xhr.onprogress = xhr.onload = null;
  xhr.abort();
  xhr.onabort = xhr.ontimeout = null;
}

/** The factory dash.js calls (`player.extend('XHRLoader', perRequestXhrLoader)`); `Xhr` is for
 * tests, which have no XMLHttpRequest of their own. */
export function perRequestXhrLoader(Xhr = globalThis.XMLHttpRequest) {
  const inFlight = new Map(); // request -> its XMLHttpRequest, until it ends or is aborted
  let latest = null;

  function abortOne(request) {
    const xhr = inFlight.get(request);
    if (!xhr) return;
    inFlight.delete(request);
    cancel(xhr);
  }

  /** With a request, cancels that one; without, every request still in flight. */
  function abort(request) {
    if (request && inFlight.has(request)) abortOne(request);
    else if (!request) for (const open of [...inFlight.keys()]) abortOne(open);
  }

  function load(request, response) {
    // A request loaded again (dash.js retries with the same object) while its last XHR is still
    // open: that one is cancelled, or both would end into the same callbacks.
    abortOne(request);
    const xhr = new Xhr();
    latest = xhr;
    xhr.open(request.method, request.url, true);
    if (request.responseType) xhr.responseType = request.responseType;
    for (const [name, value] of Object.entries(request.headers || {})) {
      if (value) xhr.setRequestHeader(name, value);
    }
    xhr.withCredentials = request.credentials === 'include';
    xhr.timeout = request.timeout;
    xhr.onload = function onload() {
      response.url = this.responseURL;
      response.status = this.status;
      response.statusText = this.statusText;
      response.headers = parseHeaders(this.getAllResponseHeaders());
      response.data = this.response;
    };
    const callbacks = request.customData || (request.customData = {});
    xhr.onloadend = callbacks.onloadend;
    xhr.onprogress = callbacks.onprogress;
    xhr.onabort = callbacks.onabort;
    xhr.ontimeout = callbacks.ontimeout;
    // Forgotten once it ends, whichever way (addEventListener: onloadend belongs to dash.js).
    xhr.addEventListener('loadend', () => {
      if (inFlight.get(request) === xhr) inFlight.delete(request);
    });
    inFlight.set(request, xhr);
    xhr.send(request.body || null);
    callbacks.abort = () => abortOne(request);
    return true;
  }

  return {
    load,
    abort,
    getXhr: () => latest,
    reset: () => abort(),
    resetInitialSettings: () => abort(),
  };
}

/** "Name: value" lines → { Name: value }, names as the browser gives them (as dash.js does). */
export function parseHeaders(text) {
  const headers = {};
  for (const line of String(text || '').trim().split(/[\r\n]+/)) {
    const at = line.indexOf(':');
    if (at > 0) headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return headers;
}

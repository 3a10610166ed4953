// hls.js's fragment loader, with parts that are let finish when hls.js abandons them.
//
// hls.js cancels the parts it no longer needs, as when it jumps to the live edge once it is
// more than `liveMaxLatencyDuration` behind. Over HTTP/1.1 a request cancelled before its
// response has been read closes its connection ("Connection was closed when it was returned to
// the pool"), so the next part opens a new one: 65 connections in a minute against 7 over TCP
// in the 1 s target's trials (docs/live.md). Over MPTCP a new connection's first bytes go on
// its first path before the second joins, which makes that part slower, which puts the player
// behind again. A part is small (a fifth to half a second of media) and the origin answers it
// as soon as it is written, so finishing it costs less than a new connection: an abandoned part
// is detached instead of cancelled. hls.js is told of the abort as before and never hears from
// the request again; the browser reads the rest and keeps the connection for the next request.
// A whole segment is still cancelled: its rest can be seconds of media, and hls.js's ABR
// abandons a slow one to free the path for a lower rung.

/** `Base`: hls.js's loader class (`Hls.DefaultConfig.loader`); returns the loader to give
 * hls.js as `fLoader`. `onDetach()` is called for each part let finish. */
export function partKeepingLoader(Base, onDetach = () => {}) {
  return class PartKeepingLoader extends Base {
    abortInternal() {
      const xhr = this.loader;
      const sent = xhr && xhr.readyState >= 1 && xhr.readyState !== 4;
      if (!sent || !this.context || !this.context.part) {
        super.abortInternal();
        return;
      }
      self.clearTimeout(this.requestTimeout);
      self.clearTimeout(this.retryTimeout);
      xhr.onreadystatechange = null;
      xhr.onprogress = null;
      this.stats.aborted = true;
      this.loader = null;
      onDetach();
    }
  };
}

// Helpers both adapters share.

/** A URL without the CMCD query argument the players add, so records name the resource. */
export function stripCmcd(url) {
  if (!url) return url;
  try {
    const parsed = new URL(url, globalThis.location ? globalThis.location.href : 'http://localhost/');
    if (!parsed.searchParams.has('CMCD')) return url;
    parsed.searchParams.delete('CMCD');
    return parsed.toString();
  } catch {
    return url;
  }
}

/** A wall-clock Date (dash.js request metrics) on the page clock of performance.now(). */
export function pageClock(date) {
  if (!date) return null;
  return date.getTime() - performance.timeOrigin;
}

/**
 * The Resource Timing entry of the most recent request for `url` (CMCD argument or not),
 * finished at or after `notBefore`: exact page-clock times for request, first byte and end.
 */
export function resourceTiming(url, notBefore = 0) {
  if (typeof performance === 'undefined' || !performance.getEntriesByType) return null;
  const plain = stripCmcd(new URL(url, location.href).toString());
  const entries = performance.getEntriesByType('resource');
  for (let i = entries.length - 1; i >= 0; i -= 1) {
    const entry = entries[i];
    if (entry.responseEnd >= notBefore && entry.responseStart > 0 && stripCmcd(entry.name) === plain) {
      return entry;
    }
  }
  return null;
}

const VIDEO_FAMILIES = { avc1: 'avc', avc3: 'avc', hvc1: 'hevc', hev1: 'hevc' };

/** The video codec family of an RFC 6381 codecs string (avc, hevc), or null (audio, other). */
export function codecFamily(codecs) {
  const prefix = String(codecs || '').split('.')[0].toLowerCase();
  return VIDEO_FAMILIES[prefix] || null;
}

/**
 * Why `family` (avc, hevc) cannot be played from this manifest in this browser, or null when it can:
 * the manifest must offer it and Media Source must decode at least one of its codecs.
 */
export function codecProblem(family, support, what = 'MPD') {
  const offered = Object.keys(support).filter((codec) => codecFamily(codec) === family);
  if (!offered.length) {
    const has = Object.keys(support).filter((codec) => codecFamily(codec)).join(', ') || 'none';
    return `codec=${family}: the ${what} has no ${family} rendition (video codecs: ${has})`;
  }
  if (!offered.some((codec) => support[codec])) {
    return `codec=${family}: this browser cannot decode ${offered.join(', ')} (MediaSource.isTypeSupported is false)`;
  }
  return null;
}

/**
 * The video ladder a player may choose from, as the `ladder` event carries it: one rung per
 * distinct representation, lowest bitrate first (renditions: { bitrate, width, height, codec }).
 */
export function ladderOf(renditions) {
  const seen = new Set();
  const rungs = [];
  for (const r of renditions) {
    if (!r || !(r.bitrate > 0)) continue;
    const rung = {
      bitrate: Math.round(r.bitrate),
      width: Math.round(r.width || 0),
      height: Math.round(r.height || 0),
      codec: String(r.codec || ''),
    };
    const key = JSON.stringify(rung);
    if (!seen.has(key)) {
      seen.add(key);
      rungs.push(rung);
    }
  }
  return rungs.sort((a, b) => a.bitrate - b.bitrate || a.height - b.height);
}

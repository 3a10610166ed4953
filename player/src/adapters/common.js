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

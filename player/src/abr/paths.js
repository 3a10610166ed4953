// What each path can carry, as the multipath-aware rule is given it (rules/multipath.js): the
// server's per-path figures (GET /api/v1/sessions/ID/paths: the kernel's delivery-rate samples of
// each path's subflows, server/seen.py) folded over a short window. The page asks every second;
// this keeps the answers and says, at a decision, each path's rate, whether a path policy holds
// it back now, whether the policy spares it (a metered path under `backup` or `deadline`: the
// page's `spared` parameter names its addresses), and whether it still delivers. A path is the
// client's address its subflows come from. Nothing here touches a browser API, so node's tests
// run the same code.

// How long a path's samples count: a few segment downloads, so the app-limited sample at the end
// of a download (the sender ran out of data, not the path out of room) does not hide the rate
// the path had during it, and a path that fades is believed within seconds.
export const PATH_WINDOW_MS = 5000;
// Data in flight that has waited this long for an acknowledgement (or three round trips, if
// longer) says the path has failed: a loss on a working path is repaired within a few round trips.
export const FAILED_AFTER_MS = 1000;

function finite(value) {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

export class PathWatch {
  constructor({ windowMs = PATH_WINDOW_MS } = {}) {
    this.windowMs = windowMs;
    this.paths = new Map(); // the client's address → { samples: [{ t, bps, acked }], held, spared, live }
    this.answers = 0;
  }

  /**
   * The collector's answer (`{ measured, paths }`) at `tMs`; `spared`: the addresses of the
   * paths the session's path policy spares. An unmeasured answer is ignored.
   */
  seen(answer, tMs, spared = []) {
    if (!answer || !answer.measured || !Array.isArray(answer.paths)) return;
    this.answers += 1;
    const present = new Set();
    for (const figure of answer.paths) {
      const path = figure?.address;
      if (typeof path !== 'string' || path === '') continue;
      present.add(path);
      const entry = this.paths.get(path) ?? { samples: [], held: false, spared: false, live: true };
      const bps = finite(figure.delivery_bps);
      const acked = finite(figure.bytes_acked);
      if (bps !== null && acked !== null) entry.samples.push({ t: tMs, bps, acked });
      entry.held = Boolean(figure.backup);
      entry.spared = spared.includes(path);
      const rttMs = finite(figure.rtt_ms) ?? 0;
      entry.live = (finite(figure.waiting_ms) ?? 0) < Math.max(FAILED_AFTER_MS, 3 * rttMs);
      entry.samples = entry.samples.filter((s) => s.t >= tMs - this.windowMs);
      this.paths.set(path, entry);
    }
    // A path the server no longer has a subflow on carries nothing until one comes back.
    for (const [path, entry] of this.paths) if (!present.has(path)) entry.live = false;
  }

  /**
   * The rule's `paths` input at `tMs`: [{ address, bps, held, spared, live }] as first seen, or
   * null while no answer has measured any (a transport the server cannot see into). A path's
   * `bps` is the larger of its highest delivery-rate sample in the window and the rate its
   * acknowledged bytes grew at across the window (both are what the path carried at least).
   */
  snapshot(tMs) {
    if (this.answers === 0) return null;
    return [...this.paths.entries()].map(([address, entry]) => {
      const recent = entry.samples.filter((s) => s.t >= tMs - this.windowMs);
      let bps = Math.max(0, ...recent.map((s) => s.bps));
      if (recent.length >= 2) {
        const first = recent[0];
        const last = recent[recent.length - 1];
        if (last.t > first.t) bps = Math.max(bps, ((last.acked - first.acked) * 8 * 1000) / (last.t - first.t));
      }
      return { address, bps, held: entry.held, spared: entry.spared, live: entry.live && recent.length > 0 };
    });
  }
}

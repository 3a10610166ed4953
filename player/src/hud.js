// The heads-up display for a person watching: what is playing, how full the buffer is, how
// fast the last segment came, and how the session has gone so far.

const FIELDS = [
  ['bitrate', 'Bitrate'],
  ['resolution', 'Resolution'],
  ['codec', 'Codec'],
  ['buffer', 'Buffer'],
  ['rate', 'Last download'],
  ['stalls', 'Stalls'],
  ['startup', 'Startup delay'],
  ['latency', 'Latency to live'],
  ['transport', 'Transport'],
  ['player', 'Player'],
  ['status', 'Status'],
];

export function formatBitrate(bps) {
  if (bps === null || bps === undefined || !Number.isFinite(bps)) return '–';
  if (bps >= 1e6) return `${(bps / 1e6).toFixed(2)} Mbit/s`;
  return `${Math.round(bps / 1e3)} kbit/s`;
}

export function createHud(root) {
  const cells = {};
  const list = document.createElement('dl');
  for (const [key, label] of FIELDS) {
    const dt = document.createElement('dt');
    dt.textContent = label;
    const dd = document.createElement('dd');
    dd.dataset.field = key;
    dd.textContent = '–';
    list.append(dt, dd);
    cells[key] = dd;
  }
  root.replaceChildren(list);

  return {
    /** view: the latest figures; absent fields keep their text. */
    update(view) {
      const r = view.rendition;
      if (r) {
        cells.bitrate.textContent = formatBitrate(r.bitrate);
        cells.resolution.textContent = r.width && r.height ? `${r.width}×${r.height}` : '–';
        cells.codec.textContent = r.codec || '–';
      }
      if (view.bufferAhead !== undefined) cells.buffer.textContent = `${view.bufferAhead.toFixed(1)} s`;
      if (view.lastDownloadRate !== undefined) cells.rate.textContent = formatBitrate(view.lastDownloadRate);
      if (view.stallCount !== undefined) {
        cells.stalls.textContent = `${view.stallCount} (${(view.stallMs / 1000).toFixed(1)} s)`;
      }
      if (view.startupMs !== undefined && view.startupMs !== null) {
        cells.startup.textContent = `${Math.round(view.startupMs)} ms`;
      }
      if (view.liveLatency) {
        const { latency_s: latency, target_s: target, playback_rate: rate } = view.liveLatency;
        const extra = [target ? `target ${target.toFixed(1)} s` : null, rate !== 1 ? `${rate.toFixed(2)}×` : null].filter(Boolean);
        cells.latency.textContent = `${latency.toFixed(1)} s${extra.length ? ` (${extra.join(', ')})` : ''}`;
      }
      if (view.transport) cells.transport.textContent = view.transport;
      if (view.player) cells.player.textContent = view.player;
      if (view.status) cells.status.textContent = view.status;
    },
  };
}

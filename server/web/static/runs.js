// Draws a trial's timeline (the JSON the page embeds, /api/runs/{run}/trials/{key}/timeline)
// with uPlot: per-path throughput, buffer level, bitrate with each segment's download rate,
// stall bands and path events. A second trial picked in the overlay menu is fetched and drawn
// dashed over the first. Dragging across a chart zooms all three to that span (uPlot's own
// selection), a double-click zooms out, hovering shows every series' value in the legend.
(function () {
  "use strict";
  const holder = document.getElementById("timeline-data");
  const main = JSON.parse(holder.textContent);
  const api = holder.dataset.api;
  const width = Math.max(600, Math.min(1200, window.innerWidth - 40));
  const PATH_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
  const STALL_FILL = ["rgba(220, 50, 47, 0.25)", "rgba(108, 61, 154, 0.18)"];
  const EVENT_STROKE = "#6a3d9a";
  let charts = [];

  // The x axis spans the whole trial, from 0 to its end (also when zoomed out again): a
  // frame of two empty points is aligned with the series, then left out.
  function align(seriesList, end) {
    const aligned = window.alignSeries([[[0, null], [end, null]], ...seriesList]);
    aligned.splice(1, 1);
    return aligned;
  }

  const mbit = (pts) => pts.map(([x, y]) => [x, y / 1e6]);
  // A rendition plays until the next switch, the last until the trial's end.
  const untilEnd = (tl, pts) => (pts.length ? [...pts, [tl.end_s, pts[pts.length - 1][1]]] : pts);

  // Stall bands and path-event lines of every drawn trial, under the series.
  function backdrop(trials) {
    return {
      hooks: {
        drawClear: [
          (u) => {
            const ctx = u.ctx;
            ctx.save();
            trials.forEach((tl, i) => {
              ctx.fillStyle = STALL_FILL[i];
              for (const [s, e] of tl.stalls) {
                const x0 = u.valToPos(s, "x", true);
                const x1 = u.valToPos(e, "x", true);
                ctx.fillRect(x0, u.bbox.top, Math.max(1, x1 - x0), u.bbox.height);
              }
              ctx.strokeStyle = EVENT_STROKE;
              ctx.fillStyle = EVENT_STROKE;
              ctx.setLineDash(i ? [4, 4] : []);
              ctx.font = `${11 * devicePixelRatio}px sans-serif`;
              for (const ev of tl.path_events) {
                const x = u.valToPos(ev.t_s, "x", true);
                ctx.beginPath();
                ctx.moveTo(x, u.bbox.top);
                ctx.lineTo(x, u.bbox.top + u.bbox.height);
                ctx.stroke();
                ctx.fillText(`${tl.paths[ev.path] || "path " + ev.path} ${ev.what}`, x + 3,
                             u.bbox.top + 12 * devicePixelRatio * (1 + i));
              }
            });
            ctx.restore();
          },
        ],
      },
    };
  }

  function line(label, colour, i, extra) {
    return Object.assign({ label: label, stroke: colour, width: 2, spanGaps: true,
                           dash: i ? [6, 4] : undefined }, extra || {});
  }

  // Zooming one chart zooms the others to the same span.
  function syncZoom(u, key) {
    if (key !== "x" || u.syncing) return;
    const { min, max } = u.scales.x;
    for (const other of charts) {
      if (other === u) continue;
      other.syncing = true;
      other.setScale("x", { min: min, max: max });
      other.syncing = false;
    }
  }

  function chart(id, title, height, series, data, trials) {
    const el = document.getElementById(id);
    el.textContent = "";
    return new uPlot({
      width: width, height: height, plugins: [backdrop(trials)],
      scales: { x: { time: false } },
      cursor: { sync: { key: "trial" } },
      hooks: { setScale: [syncZoom] },
      axes: [{ label: "time (s)" }, { label: title }],
      series: [{ label: "t (s)" }, ...series],
    }, data, el);
  }

  function draw(trials) {
    charts.forEach((u) => u.destroy());
    const end = Math.max(1, ...trials.map((tl) => tl.end_s));
    const tag = (tl) => (trials.length > 1 ? `${tl.key}: ` : "");
    const tput = [], tputSeries = [];
    const buffer = [], bufferSeries = [];
    const rate = [], rateSeries = [];
    trials.forEach((tl, i) => {
      tl.throughput_bps.forEach((pts, p) => {
        tput.push(mbit(pts));
        tputSeries.push(line(tag(tl) + (tl.paths[p] || `path ${p}`), PATH_COLOURS[p % 6], i));
      });
      buffer.push(tl.buffer_s);
      bufferSeries.push(line(tag(tl) + "buffer level (s)", i ? "#17becf" : "#1f77b4", i));
      rate.push(mbit(untilEnd(tl, tl.bitrate_bps)), mbit(tl.segment_rate_bps));
      rateSeries.push(
        line(tag(tl) + "rendition bitrate", i ? "#98df8a" : "#2ca02c", i,
             { paths: uPlot.paths.stepped({ align: 1 }) }),
        { label: tag(tl) + "segment download rate", stroke: i ? "#c5b0d5" : "#ff7f0e", width: 0,
          spanGaps: false, points: { show: true, size: 7, fill: i ? "#c5b0d5" : "#ff7f0e" } });
    });
    charts = [
      chart("chart-throughput", "Mbit/s", 240, tputSeries, align(tput, end), trials),
      chart("chart-buffer", "seconds", 200, bufferSeries, align(buffer, end), trials),
      chart("chart-rate", "Mbit/s", 240, rateSeries, align(rate, end), trials),
    ];
    window.runCharts = { throughput: charts[0], buffer: charts[1], rate: charts[2] };
    document.body.dataset.trials = trials.map((tl) => tl.key).join(" ");
    document.body.dataset.chartsReady = "1";
  }

  async function overlay(key) {
    document.body.dataset.chartsReady = "0";
    if (!key) return draw([main]);
    const r = await fetch(api + encodeURIComponent(key) + "/timeline");
    if (!r.ok) throw new Error(`timeline of ${key}: HTTP ${r.status}`);
    draw([main, await r.json()]);
  }

  if (typeof uPlot === "undefined") {
    // The page still shows its facts; the charts need the library npm installs.
    document.getElementById("chart-throughput").textContent =
      "The chart library (uPlot) is not installed here: run `make dashboard-assets`.";
    return;
  }
  const menu = document.getElementById("overlay");
  menu.addEventListener("change", () => overlay(menu.value));
  const wanted = new URLSearchParams(location.search).get("with");
  if (wanted && Array.from(menu.options).some((o) => o.value === wanted)) {
    menu.value = wanted;
    overlay(wanted);
  } else {
    draw([main]);
  }
})();

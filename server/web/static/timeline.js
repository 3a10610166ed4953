// Draws the session timeline from the JSON the page embeds. Series with their own timestamps
// are merged onto one x axis (uPlot wants aligned data); gaps are null and not joined for
// points, joined for lines.
(function () {
  "use strict";
  const tl = JSON.parse(document.getElementById("timeline-data").textContent);
  const width = Math.max(600, Math.min(1100, window.innerWidth - 40));

  const align = window.alignSeries;

  // Shades stall intervals behind the series.
  const stallBands = {
    hooks: {
      drawClear: [
        (u) => {
          const ctx = u.ctx;
          ctx.save();
          ctx.fillStyle = "rgba(220, 50, 47, 0.25)";
          for (const [s, e] of tl.stalls) {
            const x0 = u.valToPos(s, "x", true);
            const x1 = u.valToPos(e, "x", true);
            ctx.fillRect(x0, u.bbox.top, Math.max(1, x1 - x0), u.bbox.height);
          }
          ctx.restore();
        },
      ],
    },
  };

  function withEnd(points, extendLast) {
    // A step series lasts until the session's end.
    if (extendLast && points.length) return [...points, [tl.end, points[points.length - 1][1]]];
    return points;
  }

  const xScale = { time: false, range: [0, Math.max(tl.end, 1)] };

  new uPlot(
    {
      width: width, height: 220, plugins: [stallBands], scales: { x: xScale },
      axes: [{ label: "time (s)" }, { label: "seconds" }],
      series: [{}, { label: "buffer level (s)", stroke: "#1f77b4", width: 2, spanGaps: true }],
    },
    align([tl.buffer]),
    document.getElementById("chart-buffer"),
  );

  const mbit = (pts) => pts.map(([x, y]) => [x, y / 1e6]);
  new uPlot(
    {
      width: width, height: 260, plugins: [stallBands], scales: { x: xScale },
      axes: [{ label: "time (s)" }, { label: "Mbit/s" }],
      series: [
        {},
        { label: "rendition bitrate", stroke: "#2ca02c", width: 2, spanGaps: true,
          paths: uPlot.paths.stepped({ align: 1 }) },
        { label: "segment download rate", stroke: "#ff7f0e", width: 0, spanGaps: false,
          points: { show: true, size: 7, fill: "#ff7f0e" } },
      ],
    },
    align([mbit(withEnd(tl.bitrate, true)), mbit(tl.rates)]),
    document.getElementById("chart-rate"),
  );
  document.body.dataset.chartsReady = "1";
})();

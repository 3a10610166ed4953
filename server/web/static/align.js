// uPlot wants one x array for all series of a chart: the union of their timestamps, each
// series null where it has no point (lines span the gaps, points do not). Shared by the
// dashboard's session timeline and the run pages' trial timeline.
window.alignSeries = function (seriesList) {
  "use strict";
  const xs = Array.from(new Set(seriesList.flat().map((p) => p[0]))).sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const cols = seriesList.map((pts) => {
    const col = new Array(xs.length).fill(null);
    for (const [x, y] of pts) col[index.get(x)] = y;
    return col;
  });
  return [xs, ...cols];
};

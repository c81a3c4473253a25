// Draws the overview's charts from the JSON the page carries (data-series), and again after each htmx
// refresh of the fragment. No inline script: the pages' CSP allows scripts from here only.
(function () {
  "use strict";
  var PALETTE = ["#0b57c2", "#c2410c", "#146c2e", "#7e22ce", "#b3261e", "#0e7490", "#a16207", "#be185d"];
  var charts = {};

  function hhmm(ts) { return new Date(ts * 1000).toISOString().slice(11, 16); }

  function seriesFor(data, name) {
    var byKind = data[name] || {};
    var kinds = Object.keys(byKind).sort();
    var columns = [data.t];
    var series = [{ value: function (u, ts) { return ts == null ? "--" : hhmm(ts); } }];
    kinds.forEach(function (kind, i) {
      columns.push(byKind[kind]);
      series.push({ label: kind, stroke: PALETTE[i % PALETTE.length], width: 2, spanGaps: false,
                    points: { show: true, size: 4 } });
    });
    return { columns: columns, series: series };
  }

  function draw() {
    var holder = document.getElementById("chart-data");
    if (!holder || typeof uPlot === "undefined") return;
    var data = JSON.parse(holder.getAttribute("data-series"));
    document.querySelectorAll("[data-chart]").forEach(function (el) {
      var name = el.getAttribute("data-chart");
      var s = seriesFor(data, name);
      var width = Math.max(260, el.clientWidth || el.parentNode.clientWidth || 400);
      var existing = charts[name];
      if (existing && existing.root.isConnected && existing.series.length === s.series.length) {
        existing.setData(s.columns);
        return;
      }
      if (existing) existing.destroy();
      el.textContent = "";
      charts[name] = new uPlot({
        width: width, height: 200, series: s.series,
        // UTC, as every time on these pages.
        tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
        scales: { y: { range: name === "failure" ? [0, 100] : function (u, min, max) { return [0, Math.max(1, max)]; } } },
        axes: [{ values: function (u, splits) { return splits.map(hhmm); } },
               { label: name === "failure" ? "%" : "jobs/min", size: 50 }]
      }, s.columns, el);
    });
  }

  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("htmx:afterSwap", draw);
  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (name) {
      var c = charts[name];
      var w = c.root.parentNode ? c.root.parentNode.clientWidth : 0;
      if (w > 0) c.setSize({ width: Math.max(260, w), height: 200 });
    });
  });
})();

/* zerohop report: hand each chart spec (JSON prepared in Python) to uPlot.
 * No data is computed here and no text is inserted as HTML: labels reach the page
 * through uPlot, which sets textContent. */
(function () {
  "use strict";

  var PALETTE = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
    "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#393b79", "#ad494a"
  ];
  var HEIGHT = 180;

  function readSpecs() {
    var holder = document.getElementById("zh-chart-data");
    if (!holder) { return []; }
    return JSON.parse(holder.textContent || "[]");
  }

  function seriesOptions(spec, index) {
    var colour = PALETTE[index % PALETTE.length];
    var opts = { label: spec.label, stroke: colour, width: 1.5, spanGaps: false };
    if (spec.style === "points") {
      opts.paths = function () { return null; };
      opts.points = { show: true, size: 3, stroke: colour, fill: colour };
    } else if (spec.style === "step") {
      opts.paths = uPlot.paths.stepped({ align: 1 });
      opts.spanGaps = true;
      opts.points = { show: false };
    } else if (spec.style === "dashed") {
      opts.dash = [6, 4];
      opts.points = { show: false };
    } else {
      opts.points = { show: false };
    }
    return opts;
  }

  var BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

  function byteLabel(value) {
    var unit = 0;
    while (Math.abs(value) >= 1024 && unit < BYTE_UNITS.length - 1) { value /= 1024; unit += 1; }
    return (Math.round(value * 10) / 10) + " " + BYTE_UNITS[unit];
  }

  function chartOptions(spec, width) {
    var xScale = { time: false };
    if (spec.xLog) { xScale.distr = 3; xScale.log = 2; }
    if (spec.xRange) {
      var range = spec.xRange;
      xScale.range = function () { return [range[0], range[1]]; };
    }
    var yScale = {};
    if (spec.yMinZero) {
      yScale.range = function (u, min, max) {
        var top = (max === null || max === undefined || max <= 0) ? 1 : max * 1.05;
        var bottom = (min === null || min === undefined) ? 0 : Math.min(0, min);
        return [bottom, top];
      };
    }
    var series = [{ label: spec.xLabel }];
    for (var i = 0; i < spec.series.length; i++) {
      series.push(seriesOptions(spec.series[i], i));
    }
    var xAxis = { label: spec.xLabel, labelSize: 20, size: 40 };
    if (spec.xFormat === "bytes") {
      xAxis.values = function (u, splits) { return splits.map(byteLabel); };
      series[0].value = function (u, v) { return v === null || v === undefined ? "--" : byteLabel(v); };
    }
    var options = {
      width: width,
      height: HEIGHT,
      scales: { x: xScale, y: yScale },
      axes: [xAxis, { label: spec.yLabel, labelSize: 20, size: 60 }],
      series: series,
      legend: { live: true },
      hooks: { setLegend: [idleLegend] }
    };
    if (spec.kind === "time") {
      options.cursor = { sync: { key: "zh-time" } };
    }
    return options;
  }

  /* Off the chart the legend shows each series' colour and name (readable without
   * hovering; uPlot alone would print "--" for every value); on it, the values too. */
  function idleLegend(u) {
    var idle = u.cursor.idx === null || u.cursor.idx === undefined;
    if (u.root.parentNode) { u.root.parentNode.classList.toggle("zh-idle", idle); }
  }

  /* The legend shows each series' brief label; its full name (every label of a
   * telemetry lane) is the legend entry's tooltip. Set as an attribute, never as HTML. */
  function nameOnHover(plot, spec) {
    var rows = plot.root.querySelectorAll(".u-legend .u-series");
    for (var i = 1; i < rows.length && i <= spec.series.length; i++) {
      rows[i].setAttribute("title", spec.series[i - 1].full || spec.series[i - 1].label);
    }
  }

  function hidden(host) {
    var fold = host.closest("details");
    return fold !== null && !fold.open;
  }

  var plots = [];
  var rendered = 0;
  var failed = [];

  function draw(spec, host) {
    try {
      var width = Math.max(320, host.clientWidth || 640);
      var data = [spec.x];
      for (var j = 0; j < spec.series.length; j++) { data.push(spec.series[j].values); }
      var plot = new uPlot(chartOptions(spec, width), data, host);
      host.classList.add("zh-idle");
      nameOnHover(plot, spec);
      plots.push({ plot: plot, host: host });
      rendered += 1;
    } catch (err) {
      failed.push(spec.id);
      var note = document.createElement("p");
      note.className = "zh-chart-error";
      note.textContent = "chart could not be drawn: " + String(err);
      host.appendChild(note);
    }
    document.body.setAttribute("data-charts-rendered", String(rendered));
    if (failed.length) { document.body.setAttribute("data-charts-failed", failed.join(" ")); }
  }

  /* Charts inside a closed <details> (the appendix) are drawn when it is opened, at the
   * width they then have: a closed fold costs the page nothing. */
  function render() {
    var specs = readSpecs();
    var waiting = [];
    document.body.setAttribute("data-charts-total", String(specs.length));
    document.body.setAttribute("data-charts-rendered", "0");
    for (var i = 0; i < specs.length; i++) {
      var host = document.getElementById(specs[i].id);
      if (!host) { continue; }
      if (hidden(host)) { waiting.push({ spec: specs[i], host: host }); } else { draw(specs[i], host); }
    }
    var folds = document.querySelectorAll("details");
    for (var f = 0; f < folds.length; f++) {
      folds[f].addEventListener("toggle", function () {
        var still = [];
        for (var w = 0; w < waiting.length; w++) {
          if (hidden(waiting[w].host)) { still.push(waiting[w]); } else { draw(waiting[w].spec, waiting[w].host); }
        }
        waiting = still;
      });
    }
    window.addEventListener("resize", function () {
      for (var k = 0; k < plots.length; k++) {
        var w = Math.max(320, plots[k].host.clientWidth || 640);
        plots[k].plot.setSize({ width: w, height: HEIGHT });
      }
    });
  }

  render();
})();

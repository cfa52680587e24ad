/* ctxsim team overview and corpus sweeps: the peak-context histogram, tokens by tool, and the
   corpus front (total cost against information lost). Data comes from json_script blocks,
   never from markup; the tables beside each chart hold the same numbers without JS. */
(function () {
  "use strict";

  var PALETTE = ["#3b5bdb", "#e8590c", "#2f9e44", "#ae3ec9"];

  function fresh(canvas) {
    var owner = Chart.getChart(canvas);  // a swapped-in region may reuse its canvas
    if (owner) owner.destroy();
  }

  function bars(canvas, labels, series, xTitle, yTitle, horizontal) {
    fresh(canvas);
    new Chart(canvas, {
      type: "bar",
      data: { labels: labels, datasets: series.map(function (s, i) {
        return { label: s.label, data: s.data, backgroundColor: PALETTE[i % PALETTE.length] };
      }) },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        indexAxis: horizontal ? "y" : "x",
        scales: { x: { title: { display: true, text: xTitle } }, y: { title: { display: true, text: yTitle } } },
        plugins: { legend: { position: "bottom" } }
      }
    });
  }

  function renderOverview() {
    var source = document.getElementById("overview-chart-data");
    var peaks = document.getElementById("peak-chart");
    var tools = document.getElementById("tools-chart");
    if (!source || !peaks || !tools || typeof Chart === "undefined") return;
    var data = JSON.parse(source.textContent);
    var edges = data.histogram.edges;
    var binLabels = edges.slice(0, -1).map(function (lo, i) { return lo + "–" + edges[i + 1]; });
    bars(peaks, binLabels, data.labels.map(function (label, i) {
      return { label: label, data: data.histogram.counts[i] };
    }), "peak sent tokens of a call", "sessions", false);
    bars(tools, data.tools.map(function (r) { return r.tool; }), data.labels.map(function (label, i) {
      return { label: label, data: data.tools.map(function (r) { return r.tokens[i]; }) };
    }), "tokens sent", "tool", true);
  }

  function renderCorpus() {
    var canvas = document.getElementById("corpus-chart");
    var source = document.getElementById("corpus-chart-data");
    if (!canvas || !source || typeof Chart === "undefined") return;
    var data = JSON.parse(source.textContent);
    fresh(canvas);
    var pick = function (front) {
      return data.points.filter(function (p) { return p.front === front; });
    };
    new Chart(canvas, {
      type: "scatter",
      data: { datasets: [
        { label: "Pareto front", data: pick(true), backgroundColor: PALETTE[1], pointRadius: 6 },
        { label: "Other points", data: pick(false), backgroundColor: PALETTE[0], pointRadius: 4 }
      ] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: { x: { title: { display: true, text: "total cache-adjusted cost ($)" } },
                  y: { title: { display: true, text: "information-loss events" } } },
        plugins: { legend: { position: "bottom" }, tooltip: { callbacks: { label: function (ctx) {
          var p = ctx.raw;
          var n = window.ctxsimNumbers;
          return p.label + ": " + n.money(p.x) + ", " + n.num(p.y) + " lost";
        } } } },
        onClick: function (evt, elements, chart) {
          if (!elements.length) return;
          var p = chart.data.datasets[elements[0].datasetIndex].data[elements[0].index];
          var row = document.querySelector('[data-point="' + p.n + '"]');
          if (row) { row.scrollIntoView({ block: "center" }); var input = row.querySelector("input[name=name]"); if (input) input.focus(); }
        }
      }
    });
  }

  function render() { renderOverview(); renderCorpus(); }
  document.addEventListener("htmx:after:swap", render);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", render);
  else render();
})();

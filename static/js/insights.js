/* ctxsim sweep page: the tokens / cost / loss chart with its Pareto front, and auto-submitting
   selects. Data comes from a json_script block, never from markup. */
(function () {
  "use strict";

  var COLORS = { point: "rgba(59, 91, 219, 0.45)", front: "#e8590c", line: "rgba(232, 89, 12, 0.5)" };

  function radius(lost, maxLost) {
    return 4 + (maxLost ? 14 * lost / maxLost : 0);
  }

  function renderSweepChart() {
    var canvas = document.getElementById("sweep-chart");
    var source = document.getElementById("sweep-chart-data");
    if (!canvas || !source || canvas.dataset.ready) return;
    var data = JSON.parse(source.textContent);
    var owner = Chart.getChart(canvas);  // a restored page may bring its canvas back in use
    if (owner) owner.destroy();
    var toBubble = function (p) {
      return { x: p.x, y: p.y, r: radius(p.lost, data.maxLost), label: p.label, lost: p.lost, apply: p.apply };
    };
    var others = data.points.filter(function (p) { return !p.front; }).map(toBubble);
    var front = data.points.filter(function (p) { return p.front; }).map(toBubble);
    var line = front.slice().sort(function (a, b) { return a.x - b.x; });
    new Chart(canvas, {
      type: "bubble",
      data: { datasets: [
        { label: "Pareto front", data: front, backgroundColor: COLORS.front, borderColor: COLORS.front },
        { label: "Other points", data: others, backgroundColor: COLORS.point, borderColor: COLORS.point },
        { type: "line", label: "front (by tokens)", data: line, borderColor: COLORS.line,
          pointRadius: 0, pointHitRadius: 0, fill: false, borderDash: [4, 4] }
      ] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: { x: { title: { display: true, text: "input tokens over the session" } },
                  y: { title: { display: true, text: "cache-adjusted cost ($)" } } },
        plugins: {
          legend: { position: "bottom" },
          tooltip: { callbacks: { label: function (ctx) {
            var p = ctx.raw;
            var n = window.ctxsimNumbers;
            return p.label + ": " + n.num(p.x) + " tokens, " + n.money(p.y) + ", " + n.num(p.lost) + " lost";
          } } }
        },
        onClick: function (evt, elements, chart) {
          var hit = elements.find(function (e) { return chart.data.datasets[e.datasetIndex].type !== "line"; });
          if (hit) window.location.assign(chart.data.datasets[hit.datasetIndex].data[hit.index].apply);
        }
      }
    });
    canvas.dataset.ready = "1";
  }

  document.addEventListener("change", function (evt) {
    var el = evt.target;
    if (el.matches && el.matches("[data-autosubmit]") && el.form) el.form.requestSubmit();
  });
  // Says the selects now submit on change (tests wait for it instead of guessing a delay).
  document.documentElement.dataset.autosubmit = "ready";
  document.addEventListener("htmx:after:swap", renderSweepChart);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", renderSweepChart);
  else renderSweepChart();
})();

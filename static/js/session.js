/* ctxsim session and compare pages: the tokens chart, call navigation, auto-submitting forms.
   Data comes from <script type="application/json"> blocks (json_script), never from markup. */
(function () {
  "use strict";

  function readJSON(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  var COLORS = { raw: "#adb5bd", sent: "#3b5bdb", other: "#e8590c", failed: "#c92a2a",
                 spill: "#f08c00", limit: "#c92a2a", selected: "#0b7285", comment: "#7048e8",
                 predicted: "#2b8a3e", recorded: "#212529", billed: "#d6336c",
                 flagged: "#c92a2a", window: "#495057" };
  var charts = {};

  function pointStyle(data, failed, color) {
    var failedSet = new Set(failed || []);
    return {
      radius: data.labels.map(function (i) { return i === data.selected ? 6 : (failedSet.has(i) ? 5 : 2); }),
      background: data.labels.map(function (i) {
        if (i === data.selected) return COLORS.selected;
        return failedSet.has(i) ? COLORS.failed : color;
      })
    };
  }

  function baseOptions(onPick) {
    return {
      animation: false, responsive: true, maintainAspectRatio: false,
      interaction: { mode: "index", intersect: false },
      scales: { x: { title: { display: true, text: "model call" } },
                y: { beginAtZero: true, title: { display: true, text: "input tokens" } } },
      plugins: { legend: { position: "bottom" } },
      onClick: function (evt, elements, chart) {
        var points = chart.getElementsAtEventForMode(evt, "index", { intersect: false }, true);
        if (points.length) onPick(chart.data.labels[points[0].index]);
      }
    };
  }

  function callUrl(index) {
    var url = new URL(window.location.href);
    url.searchParams.set("call", index);
    return url.pathname + url.search;
  }

  // The element to replace is also the request's source, so htmx itself names it in
  // HX-Target (htmx.ajax() defaults the source to <body>) and the server answers with the
  // partial of that id, as for any other htmx control of the page.
  function swapInto(selector, url) {
    if (!document.querySelector(selector)) return;
    htmx.ajax("GET", url, { source: selector, target: selector, swap: "outerHTML" });
  }

  function openCall(index) { swapInto("#call-view", callUrl(index)); }

  // A canvas can come back already holding a chart (history restore re-runs the scripts on
  // the same element), so the chart to destroy is the canvas's own, not only the last one made.
  function freeCanvas(canvas, previous) {
    var owner = Chart.getChart(canvas);
    if (owner) owner.destroy();
    if (previous && previous !== owner) previous.destroy();
  }

  function renderSessionChart() {
    var data = readJSON("chart-data");
    var canvas = document.getElementById("tokens-chart");
    if (!data || !canvas) return;
    freeCanvas(canvas, charts.session);
    var sent = pointStyle(data, data.failed, COLORS.sent);
    var spillSet = new Set(data.spills);
    var datasets = [
      { label: "raw history" + (data.calibrated ? " (calibrated)" : " (estimate)"), data: data.raw,
        borderColor: COLORS.raw, backgroundColor: COLORS.raw, pointRadius: 0, borderWidth: 1.5 },
      { label: "sent (" + data.counter + (data.calibrated ? ", calibrated)" : ", estimate)"), data: data.sent, borderColor: COLORS.sent,
        backgroundColor: sent.background, pointRadius: sent.radius, borderWidth: 2 },
      { label: "spills", type: "scatter", showLine: false, borderColor: COLORS.spill,
        backgroundColor: COLORS.spill, pointStyle: "triangle", pointRadius: 5,
        data: data.labels.map(function (i, n) { return spillSet.has(i) ? data.sent[n] : null; }) },
      // Calls with review comments (json keys are strings: "3" for call 3).
      { label: "comments", type: "scatter", showLine: false, borderColor: COLORS.comment,
        backgroundColor: COLORS.comment, pointStyle: "rectRounded", pointRadius: 6,
        data: data.labels.map(function (i, n) { return (data.comments || {})[i] ? data.sent[n] : null; }) }
    ];
    // Compactions: where this replay's thresholds compact, and where the agent itself did
    // (recorded in the transcript), with different glyphs. Recorded ones sit on the raw line.
    if ((data.predicted || []).length) {
      var predictedSet = new Set(data.predicted);
      datasets.push({ label: "compacted (simulated)", type: "scatter", showLine: false,
        borderColor: COLORS.predicted, backgroundColor: COLORS.predicted, pointStyle: "rectRot",
        pointRadius: 7, data: data.labels.map(function (i, n) { return predictedSet.has(i) ? data.sent[n] : null; }) });
    }
    if ((data.recorded || []).length) {
      var recordedSet = new Set(data.recorded);
      datasets.push({ label: "compacted (recorded)", type: "scatter", showLine: false,
        borderColor: COLORS.recorded, backgroundColor: COLORS.recorded, pointStyle: "star",
        pointRadius: 9, borderWidth: 2,
        data: data.labels.map(function (i, n) { return recordedSet.has(i) ? data.raw[n] : null; }) });
    }
    // SPEC §11: what the provider billed, as points beside the (calibrated) lines.
    if ((data.billed || []).some(function (v) { return v !== null; })) {
      var flaggedSet = new Set(data.flagged || []);
      datasets.push({ label: "recorded by the provider", type: "scatter", showLine: false,
        borderColor: COLORS.billed, backgroundColor: COLORS.billed, pointRadius: 3,
        data: data.billed });
      if (flaggedSet.size) {
        datasets.push({ label: "flagged: context the transcript does not show", type: "scatter",
          showLine: false, borderColor: COLORS.flagged, backgroundColor: COLORS.flagged,
          pointStyle: "crossRot", pointRadius: 8, borderWidth: 2,
          data: data.labels.map(function (i, n) { return flaggedSet.has(i) ? data.billed[n] : null; }) });
      }
    }
    if (data.window) {
      datasets.push({ label: data.model + " context window " + window.ctxsimNumbers.num(data.window) + " tokens",
        data: data.labels.map(function () { return data.window; }), borderColor: COLORS.window,
        borderDash: [2, 3], pointRadius: 0, borderWidth: 1 });
    }
    if (data.limit !== null && data.limit !== undefined) {
      datasets.push({ label: data.limitLabel + " " + window.ctxsimNumbers.num(data.limit) + " tokens", data: data.labels.map(function () { return data.limit; }),
        borderColor: COLORS.limit, borderDash: [6, 4], pointRadius: 0, borderWidth: 1.5 });
    }
    charts.session = new Chart(canvas, { type: "line", data: { labels: data.labels, datasets: datasets },
                                         options: baseOptions(openCall) });
    canvas.dataset.ready = "1";
  }

  function markSelected(index) {
    var chart = charts.session;
    var data = readJSON("chart-data");
    if (!chart || !data) return;
    data.selected = index;
    var sent = pointStyle(data, data.failed, COLORS.sent);
    chart.data.datasets[1].pointRadius = sent.radius;
    chart.data.datasets[1].backgroundColor = sent.background;
    chart.update("none");
  }

  function renderCompareChart() {
    var data = readJSON("compare-data");
    var canvas = document.getElementById("compare-chart");
    if (!data || !canvas) return;
    freeCanvas(canvas, charts.compare);
    var palette = [COLORS.sent, COLORS.other];
    var datasets = [{ label: "raw history", data: data.raw, borderColor: COLORS.raw, pointRadius: 0, borderWidth: 1.5 }];
    data.series.forEach(function (s, n) {
      var style = pointStyle({ labels: data.labels, selected: data.selected }, s.failed, palette[n]);
      datasets.push({ label: s.label, data: s.sent, borderColor: palette[n], backgroundColor: style.background,
                      pointRadius: style.radius, borderWidth: 2 });
    });
    charts.compare = new Chart(canvas, { type: "line", data: { labels: data.labels, datasets: datasets },
      options: baseOptions(function (index) { swapInto("#compare-calls", callUrl(index)); }) });
    canvas.dataset.ready = "1";
  }

  document.addEventListener("change", function (evt) {
    var el = evt.target;
    if (el && el.hasAttribute && el.hasAttribute("data-autosubmit") && el.form) el.form.requestSubmit();
  });
  // Says the selects now submit on change (tests wait for it instead of guessing a delay).
  document.documentElement.dataset.autosubmit = "ready";

  document.addEventListener("keydown", function (evt) {
    var tag = (evt.target && evt.target.tagName) || "";
    if (/^(INPUT|SELECT|TEXTAREA)$/.test(tag) || evt.ctrlKey || evt.metaKey || evt.altKey) return;
    var id = null;
    if (evt.key === "j" || evt.key === "ArrowRight") id = "next-call";
    if (evt.key === "k" || evt.key === "ArrowLeft") id = "prev-call";
    var link = id && document.getElementById(id);
    if (!link) return;
    evt.preventDefault();
    // Request directly rather than link.click(): a link swapped in a moment ago may not be
    // wired by htmx yet, and clicking it would load the whole page.
    swapInto(link.getAttribute("hx-target") || "#call-view", link.getAttribute("href"));
  });

  // "next rewritten", "next spilled" and the count badges: each click goes to the next message
  // of that status below the one last reached (their href, the first such message, is the
  // fallback without this script).
  document.addEventListener("click", function (evt) {
    var link = evt.target && evt.target.closest && evt.target.closest("#call-view a[data-status]");
    if (!link) return;
    var rows = document.querySelectorAll("#call-view li.msg.status-" + link.dataset.status);
    if (!rows.length) return;
    evt.preventDefault();
    var current = document.querySelector("#call-view li.msg.current");
    var next = rows[0];
    if (current) {
      for (var i = 0; i < rows.length; i++) {
        if (current.compareDocumentPosition(rows[i]) & Node.DOCUMENT_POSITION_FOLLOWING) { next = rows[i]; break; }
      }
      current.classList.remove("current");
    }
    next.classList.add("current");
    next.scrollIntoView({ block: "start" });
    history.replaceState(history.state, "", "#" + next.id);
  });

  // A permalink (#comment-<id>) opens the call; show the comment even inside a closed <details>.
  function revealComment() {
    var match = /^#(comment-\d+)$/.exec(window.location.hash);
    var el = match && document.getElementById(match[1]);
    if (!el || el.classList.contains("target")) return;
    for (var p = el.parentElement; p; p = p.parentElement) if (p.tagName === "DETAILS") p.open = true;
    el.classList.add("target");
    el.scrollIntoView({ block: "center" });
  }

  document.addEventListener("htmx:after:swap", function () {
    revealComment();
    var view = document.getElementById("call-view");
    var canvas = document.getElementById("tokens-chart");
    if (canvas && !canvas.dataset.ready) renderSessionChart();
    else if (view) markSelected(parseInt(view.dataset.call, 10));
    var compare = document.getElementById("compare-chart");
    if (compare && !compare.dataset.ready) renderCompareChart();
  });

  function init() { renderSessionChart(); renderCompareChart(); revealComment(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();

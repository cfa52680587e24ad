/* ctxsim call view: a search hit lands on its message, and the searched words are highlighted.
   The words come from the call view's data-highlight attribute (JSON, escaped by the
   template) and are only ever matched against text nodes: nothing is parsed as HTML. Chromium
   and other browsers with the CSS Custom Highlight API get ranges painted by
   ::highlight(search-terms); others get <mark> elements made with the DOM (text nodes split,
   never innerHTML). */
(function () {
  "use strict";

  var NAME = "search-terms";
  var MAX_RANGES = 5000;  // a word in every line of a long call: enough to see, cheap to paint
  var landed = false;  // the page's own hit: scrolled to once, not again after each swap

  // A term as the search reads it: its words in order, any whitespace between, any case.
  function pattern(term) {
    var words = term.split(/\s+/).filter(Boolean).map(function (w) {
      return w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    });
    return words.length ? new RegExp(words.join("\\s+"), "giu") : null;
  }

  function textNodes(root) {
    var nodes = [];
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: function (node) {
        var el = node.parentElement;
        return el && el.closest(".msg-head, summary, script, style") ? NodeFilter.FILTER_REJECT
                                                                      : NodeFilter.FILTER_ACCEPT;
      }
    });
    while (walker.nextNode()) nodes.push(walker.currentNode);
    return nodes;
  }

  // Ranges of every occurrence of the terms in one message (an occurrence may span the spans
  // of the syntax highlighting: offsets are mapped back to their text nodes).
  function rangesIn(root, patterns) {
    var nodes = textNodes(root);
    var text = "";
    var starts = [];
    nodes.forEach(function (n) { starts.push(text.length); text += n.data; });
    function at(offset, end) {
      var i = 0;
      while (i + 1 < nodes.length && (end ? starts[i + 1] < offset : starts[i + 1] <= offset)) i++;
      return [nodes[i], offset - starts[i]];
    }
    var ranges = [];
    patterns.forEach(function (re) {
      re.lastIndex = 0;
      var m;
      while ((m = re.exec(text)) !== null) {
        if (!m[0].length) { re.lastIndex++; continue; }
        var range = document.createRange();
        var s = at(m.index, false), e = at(m.index + m[0].length, true);
        range.setStart(s[0], s[1]);
        range.setEnd(e[0], e[1]);
        ranges.push(range);
      }
    });
    return ranges;
  }

  function markWithElements(ranges) {
    // Without the Highlight API: wrap each occurrence that lies in one text node, from the
    // last one back so the offsets of the others stay right.
    ranges.filter(function (r) { return r.startContainer === r.endContainer; })
      .sort(function (a, b) { return b.compareBoundaryPoints(Range.START_TO_START, a); })
      .forEach(function (r) {
        var mark = document.createElement("mark");
        mark.className = NAME;
        try { r.surroundContents(mark); } catch (e) { /* overlapping occurrence: skip */ }
      });
  }

  function highlight(view) {
    var terms = [];
    try { terms = JSON.parse(view.dataset.highlight || "[]"); } catch (e) { terms = []; }
    var patterns = terms.map(pattern).filter(Boolean);
    var ranges = [];
    if (patterns.length) {
      view.querySelectorAll("li.msg").forEach(function (li) {
        ranges = ranges.concat(rangesIn(li, patterns));
      });
    }
    ranges.sort(function (a, b) { return a.compareBoundaryPoints(Range.START_TO_START, b); });
    ranges = ranges.slice(0, MAX_RANGES);
    if (window.CSS && CSS.highlights && typeof Highlight === "function") {
      var painted = new Highlight();
      ranges.forEach(function (r) { painted.add(r); });
      CSS.highlights.set(NAME, painted);
    } else {
      markWithElements(ranges);
    }
    view.dataset.highlighted = String(ranges.length);
  }

  function land(view) {
    if (landed || view.dataset.at === undefined) return;
    landed = true;
    var row = view.querySelector('li.msg[data-origin="' + CSS.escape(view.dataset.at) + '"]');
    if (!row) return;
    for (var p = row.parentElement; p; p = p.parentElement) if (p.tagName === "DETAILS") p.open = true;
    row.classList.add("landed");
    row.setAttribute("tabindex", "-1");
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "center" });
  }

  function run() {
    var view = document.getElementById("call-view");
    if (!view) return;
    highlight(view);
    land(view);
    document.documentElement.dataset.landing = "ready";  // tests wait for this
  }

  document.addEventListener("htmx:after:swap", run);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
})();

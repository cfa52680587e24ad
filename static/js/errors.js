// A failed htmx request keeps what the page shows and says what happened in a banner, instead of
// swapping an error page (or Django's debug page) into the middle of the view. 404, 429 and 5xx
// are in htmx-config's noSwap (base.html); other 4xx answers are the app's own messages and still
// swap. A 429 (the user's replay slots are busy, replays/limits.py) never replaces content: a
// poll that got one keeps the section it had and polls again.
(function () {
  "use strict";

  function banner(text, retry) {
    var box = document.getElementById("request-error");
    if (!box) return;
    box.querySelector("[data-message]").textContent = text;
    box.querySelector("[data-retry]").hidden = !retry;
    box.setAttribute("role", "alert");  // only while shown: a hidden alert is still an alert
    box.hidden = false;
  }

  function describe(status, path) {
    if (status === 404) {
      return /^\/sessions\/\d+\//.test(path)
        ? "This session no longer exists (it was deleted, or you are no longer in its team)."
        : "This page no longer exists.";
    }
    if (status === 429) {
      return "You already have replays running: this one waits until one of them finishes.";
    }
    return "Something went wrong on the server — retry in a moment.";
  }

  document.addEventListener("htmx:response:error", function (evt) {
    var ctx = evt.detail && evt.detail.ctx;
    var status = ctx && ctx.response ? ctx.response.status : 0;
    if (status !== 404 && status !== 429 && status < 500) return;
    var path = "";
    try { path = new URL(ctx.request.action || ctx.response.url || "", location.href).pathname; }
    catch (e) { path = location.pathname; }
    banner(describe(status, path), status >= 500);
  });

  document.addEventListener("htmx:error", function () {
    banner("The server could not be reached — check the connection and retry.", true);
  });

  document.addEventListener("click", function (evt) {
    var box = document.getElementById("request-error");
    if (!box || !box.contains(evt.target)) return;
    if (evt.target.closest("[data-retry]")) location.reload();
    if (evt.target.closest("[data-dismiss]")) { box.hidden = true; box.removeAttribute("role"); }
  });
})();

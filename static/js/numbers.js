// Numbers in the charts as the pages write them (ctxsim/replays/templatetags/numbers.py):
// thousands separators, the minus sign U+2212, dollars signed before the symbol with cents
// from one dollar and four places below it. Loaded by base.html before any page script.
(function () {
  "use strict";
  var MINUS = "\u2212";
  function num(value) {
    if (typeof value !== "number" || !isFinite(value)) return value == null ? "" : String(value);
    var text = value.toLocaleString("en-US", { maximumFractionDigits: 2 });
    return text.replace("-", MINUS);
  }
  function money(value) {
    if (typeof value !== "number" || !isFinite(value)) return value == null ? "" : String(value);
    var places = Math.abs(value) >= 1 || value === 0 ? 2 : 4;
    var text = "$" + Math.abs(value).toLocaleString("en-US", {
      minimumFractionDigits: places, maximumFractionDigits: places });
    return value < 0 && /[1-9]/.test(text) ? MINUS + text : text;
  }
  window.ctxsimNumbers = { num: num, money: money };
})();

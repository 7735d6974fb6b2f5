// A board page's filters and column chooser; the view lives in the URL's query, so a link or a
// reload shows the same rows and columns (the API takes the same filters: q, source,
// training, device). Entries keep their ranks: filtering hides rows, it never re-ranks.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var controls = document.getElementById("board-controls");
  if (!controls) return;
  var search = document.getElementById("board-search");
  var training = document.getElementById("board-training");
  var device = document.getElementById("board-device");
  var sources = Array.prototype.slice.call(controls.querySelectorAll("input[name=source]"));
  var columns = Array.prototype.slice.call(controls.querySelectorAll("input[name=column]"));
  var rows = Array.prototype.slice.call(document.querySelectorAll("table.board tbody tr"));

  function list(value) { return value ? value.split(",").filter(Boolean) : []; }
  function read() {
    var query = new URLSearchParams(location.search);
    search.value = query.get("q") || "";
    training.value = query.get("training") || "";
    device.value = query.get("device") || "";
    var wanted = list(query.get("source"));
    sources.forEach(function (box) { box.checked = !wanted.length || wanted.indexOf(box.value) >= 0; });
    var hidden = list(query.get("hide"));
    columns.forEach(function (box) { box.checked = hidden.indexOf(box.value) < 0; });
  }
  function write() {
    var query = new URLSearchParams(location.search);
    var set = function (key, value) { if (value) query.set(key, value); else query.delete(key); };
    set("q", search.value.trim());
    set("training", training.value);
    set("device", device.value);
    var on = sources.filter(function (box) { return box.checked; }).map(function (box) { return box.value; });
    set("source", on.length === sources.length ? "" : on.join(",") || "none");
    set("hide", columns.filter(function (box) { return !box.checked; }).map(function (box) { return box.value; }).join(","));
    var text = query.toString();
    history.replaceState(null, "", location.pathname + (text ? "?" + text : ""));
  }
  function apply() {
    var q = search.value.trim().toLowerCase(), shown = 0;
    var on = sources.filter(function (box) { return box.checked; }).map(function (box) { return box.value; });
    rows.forEach(function (row) {
      var visible = on.indexOf(row.dataset.source) >= 0 &&
        (!q || row.dataset.search.indexOf(q) >= 0) &&
        (!training.value || row.dataset.training === training.value) &&
        (!device.value || row.dataset.device === device.value);
      row.hidden = !visible;
      if (visible) shown++;
    });
    var hidden = columns.filter(function (box) { return !box.checked; }).map(function (box) { return box.value; });
    document.querySelectorAll("table.board [data-col]").forEach(function (cell) {
      cell.hidden = hidden.indexOf(cell.dataset.col) >= 0;
    });
    document.getElementById("board-shown").textContent = shown + " of " + rows.length + " entries shown";
  }
  read();
  apply();
  [search, training, device].concat(sources, columns).forEach(function (input) {
    input.addEventListener(input === search ? "input" : "change", function () { write(); apply(); });
  });
});

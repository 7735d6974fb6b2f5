// Click a column header of a table.sortable to sort its rows (numbers by value, text by name).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (header, column) {
      header.addEventListener("click", function () {
        var ascending = !header.classList.contains("sorted-asc");
        table.querySelectorAll("thead th").forEach(function (h) {
          h.classList.remove("sorted-asc", "sorted-desc");
        });
        header.classList.add(ascending ? "sorted-asc" : "sorted-desc");
        var numeric = header.dataset.type === "number";
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[column].dataset.value || "", y = b.cells[column].dataset.value || "";
          if (numeric) {
            var nx = x === "" ? -Infinity : parseFloat(x), ny = y === "" ? -Infinity : parseFloat(y);
            return ascending ? nx - ny : ny - nx;
          }
          return ascending ? x.localeCompare(y) : y.localeCompare(x);
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
});

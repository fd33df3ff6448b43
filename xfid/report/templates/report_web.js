/* xfid HTML report: sort (click a header), filter (a box per table, one search box for all).
   Inlined and allowed by its hash. Reads and writes text only through textContent: the report's
   data is never parsed as HTML here. */
(function () {
  "use strict";
  var collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
  var tables = Array.prototype.slice.call(document.querySelectorAll("table.data"));
  var search = document.getElementById("search");
  var searchCount = document.getElementById("search-count");
  var rowText = new Map();
  /* a cell with no data-v that is only a number (a percent, a factor): sorted by its value */
  var PLAIN_NUMBER = /^[+\-\u2212]?\d+(\.\d+)?(e[+\-]?\d+)?\s?(%|×)?$/;

  /* What a cell sorts by: its data-v number when it has one, else its text; null when empty. */
  function cellKey(td) {
    if (!td) { return null; }
    var v = td.getAttribute("data-v");
    if (v !== null) {
      var x = parseFloat(v);
      return isFinite(x) ? x : null;
    }
    var t = td.textContent.trim();
    if (PLAIN_NUMBER.test(t)) { return parseFloat(t.replace("\u2212", "-")); }
    return t === "" || t === "—" ? null : t;
  }

  /* Empty cells last in both directions; numbers before text; numbers by value, text by a
     numeric-aware collation (XF-2 before XF-10). */
  function compare(a, b, dir) {
    if (a === null || b === null) { return a === b ? 0 : (a === null ? 1 : -1); }
    var na = typeof a === "number", nb = typeof b === "number";
    if (na !== nb) { return na ? -1 : 1; }
    return dir * (na ? a - b : collator.compare(a, b));
  }

  function sortTable(table, th) {
    var col = th.cellIndex;
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (r, i) {
      return { row: r, key: cellKey(r.cells[col]), i: i };
    });
    rows.sort(function (x, y) { return compare(x.key, y.key, dir) || x.i - y.i; });
    rows.forEach(function (x) { body.appendChild(x.row); });
  }

  /* Every row's provenance lines by row id, from the JSON data block (parsed once, when first needed). */
  var provenance = null;
  function provOf(row) {
    if (provenance === null) {
      var block = document.getElementById("provenance");
      provenance = block ? JSON.parse(block.textContent) : {};
    }
    return Object.prototype.hasOwnProperty.call(provenance, row.id) ? provenance[row.id] : [];
  }

  /* A row's <details> shows its provenance lines when first opened, written as text. */
  function fill(details) {
    if (!details.open || details.querySelector("dl")) { return; }
    var row = details.closest("tr");
    var dl = document.createElement("dl");
    provOf(row).forEach(function (line) {
      var dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = line[0];
      dd.textContent = line[1];
      dl.appendChild(dt);
      dl.appendChild(dd);
    });
    details.appendChild(dl);
  }

  /* What the filters match: the row's text and its provenance (a file name finds its rows). */
  function textOf(row) {
    var t = rowText.get(row);
    if (t === undefined) {
      t = (row.textContent + " " + provOf(row).map(function (l) { return l[1]; }).join(" ")).toLowerCase();
      rowText.set(row, t);
    }
    return t;
  }

  function filterBox(table) {
    return document.querySelector('input.tfilter[data-table="' + table.id + '"]');
  }

  /* A row shows when it matches both its table's filter and the search box (substring, any case). */
  function apply() {
    var q = search ? search.value.trim().toLowerCase() : "";
    var total = 0;
    tables.forEach(function (table) {
      var box = filterBox(table);
      var f = box ? box.value.trim().toLowerCase() : "";
      var rows = table.tBodies[0] ? table.tBodies[0].rows : [];
      var shown = 0;
      Array.prototype.forEach.call(rows, function (r) {
        var t = textOf(r);
        var ok = (f === "" || t.indexOf(f) !== -1) && (q === "" || t.indexOf(q) !== -1);
        r.hidden = !ok;
        if (ok) { shown += 1; }
      });
      total += shown;
      table.classList.toggle("nomatch", shown === 0 && (q !== "" || f !== ""));
      var count = document.querySelector('span.tcount[data-table="' + table.id + '"]');
      if (count) {
        count.textContent = shown === rows.length ? rows.length + (rows.length === 1 ? " row" : " rows")
          : shown + " of " + rows.length + " rows";
      }
    });
    if (searchCount) { searchCount.textContent = q === "" ? "" : total + " matching rows"; }
  }

  function headerHeight() {
    var h = document.getElementById("top");
    if (h) { document.documentElement.style.setProperty("--header-h", h.offsetHeight + "px"); }
  }

  tables.forEach(function (table) {
    var head = table.tHead;
    if (!head) { return; }
    Array.prototype.forEach.call(head.rows[0].cells, function (th) {
      if (th.classList.contains("nosort")) { return; }
      th.setAttribute("title", "sort by this column");
      th.addEventListener("click", function () { sortTable(table, th); });
    });
    var box = filterBox(table);
    if (box) { box.addEventListener("input", apply); }
  });
  if (search) { search.addEventListener("input", apply); }
  document.addEventListener("toggle", function (e) {
    if (e.target instanceof HTMLDetailsElement) { fill(e.target); }
  }, true);
  window.addEventListener("resize", headerHeight);
  headerHeight();
}());

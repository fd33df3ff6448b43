/* xfid HTML report: writes the key tables' rows (from a JSON data block), sorts (click a header),
   filters (a box per table, one search box for all) and shows a row's provenance when it opens.
   Inlined and allowed by its hash. Reads and writes text only through textContent: the report's
   data is never parsed as HTML here. */
(function () {
  "use strict";
  var collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

  /* A name as text, with a line-break chance after each / and , (never inside a part). */
  function breakable(td, text) {
    text.split(/([\/,])/).forEach(function (part, i) {
      td.appendChild(document.createTextNode(part));
      if (i % 2 === 1) { td.appendChild(document.createElement("wbr")); }
    });
  }

  /* The key tables' rows, from the JSON block "keys": {table id: {cols, rows}}; a row is
     [id, kind, issue id, number of provenance lines, cells], a cell a text or [sort value, text]. */
  function buildKeys() {
    var block = document.getElementById("keys");
    var all = block ? JSON.parse(block.textContent) : {};
    Object.keys(all).forEach(function (tid) {
      var table = document.getElementById(tid);
      if (!table) { return; }
      var spec = all[tid], rows = document.createDocumentFragment();
      spec.rows.forEach(function (r) {
        var tr = document.createElement("tr");
        tr.id = r[0];
        tr.className = "kind-" + r[1];
        r[4].forEach(function (c, i) {
          var td = document.createElement("td");
          td.className = spec.cols[i];
          if (spec.cols[i] === "n") { td.setAttribute("data-v", c[0]); td.textContent = c[1]; }
          else if (spec.cols[i] === "key") { breakable(td, c); }
          else { td.textContent = c; }
          tr.appendChild(td);
        });
        var issue = document.createElement("td");
        if (r[2]) {
          var a = document.createElement("a");
          a.setAttribute("href", "#" + r[2]);
          a.textContent = r[2];
          issue.appendChild(a);
        }
        tr.appendChild(issue);
        var prov = document.createElement("td");
        prov.className = "prov";
        if (r[3]) {
          var d = document.createElement("details"), s = document.createElement("summary");
          s.textContent = r[3] + (r[3] === 1 ? " field" : " fields");
          d.appendChild(s);
          prov.appendChild(d);
        } else { prov.textContent = "—"; }
        tr.appendChild(prov);
        rows.appendChild(tr);
      });
      table.tBodies[0].appendChild(rows);
    });
  }
  buildKeys();
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

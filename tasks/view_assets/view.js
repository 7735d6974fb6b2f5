// sumbench view: one or two runs item by item (data: the JSON of benchmark/viewer.py).
// Text from the data only ever reaches the page as text (textContent), never as markup.
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("data").textContent);
  var texts = data.texts, items = data.items, runs = data.runs, tasks = data.tasks;
  var two = runs.length === 2, PAGE = 50, LABEL = ["A", "B"];
  var state = {task: "", domain: "", run: "0", min: "", max: "", q: "", sort: "order", page: 0};
  var haystacks = new Array(items.length);
  var timings = {};
  window.sumbenchView = {timings: timings, state: state};

  function $(id) { return document.getElementById(id); }
  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function text(index) { return index === null || index === undefined ? null : texts[index]; }
  function fixed(value) { return typeof value === "number" ? value.toFixed(3) : "—"; }
  function primary(item, run) {
    var values = item.values[run];
    if (!values) return null;
    var value = values[tasks[item.task].primary];
    return typeof value === "number" ? value : null;
  }
  function gap(item) {
    var a = primary(item, 0), b = primary(item, 1);
    return a === null || b === null ? null : b - a;
  }
  function haystack(index) {
    if (haystacks[index] === undefined) {
      var item = items[index], parts = [item.id, item.task, item.domain];
      item.short.forEach(function (pair) { parts.push(text(pair[1])); });
      if (typeof item.reference === "number") parts.push(text(item.reference));
      item.predictions.forEach(function (p) { if (p !== null) parts.push(text(p)); });
      haystacks[index] = parts.join("\n").toLowerCase();
    }
    return haystacks[index];
  }

  // ---- state <-> URL (a link or a reload keeps the view) -----------------------------------
  // a link's values are taken only when they name what this page has (own properties, never
  // inherited ones such as __proto__ or valueOf); the others are ignored, and the note says so
  function own(object, key) { return Object.prototype.hasOwnProperty.call(object, key); }
  var domains = {};
  items.forEach(function (item) { if (item.domain) domains[item.domain] = true; });
  function number(value) { return value === "" || (value.trim() !== "" && isFinite(Number(value))); }
  var VALID = {
    task: function (value) { return value === "" || own(tasks, value); },
    domain: function (value) { return value === "" || own(domains, value); },
    run: function (value) { return value === "0" || (two && value === "1"); },
    min: number, max: number, q: function () { return true; },
    sort: function (value) { return own(SORTS, value) && (two || !/^(b-|gap-)/.test(value)); },
    page: function (value) { return /^[0-9]{1,9}$/.test(value); }
  };
  var ignored = [];
  function readHash() {
    var query = new URLSearchParams(location.hash.slice(1));
    ignored = [];
    query.forEach(function (value, key) {
      if (!own(state, key) || !VALID[key](value)) { ignored.push(key + "=" + value); return; }
      state[key] = key === "page" ? parseInt(value, 10) : value;
    });
    window.sumbenchView.ignored = ignored;
  }
  function writeHash() {
    var query = new URLSearchParams();
    Object.keys(state).forEach(function (key) {
      var value = state[key];
      if (value !== "" && !(key === "sort" && value === "order") && !(key === "page" && !value) &&
          !(key === "run" && value === "0")) query.set(key, value);
    });
    history.replaceState(null, "", "#" + query.toString());
  }

  // ---- filtering and sorting --------------------------------------------------------------
  var SORTS = {
    order: null,
    "a-asc": function (x) { return primary(x, 0); }, "a-desc": function (x) { return negate(primary(x, 0)); },
    "b-asc": function (x) { return primary(x, 1); }, "b-desc": function (x) { return negate(primary(x, 1)); },
    "gap-asc": gap, "gap-desc": function (x) { return negate(gap(x)); },
    "gap-abs": function (x) { var g = gap(x); return g === null ? null : -Math.abs(g); }
  };
  function negate(value) { return value === null ? null : -value; }

  function selected() {
    var started = performance.now();
    var query = state.q.trim().toLowerCase(), run = parseInt(state.run, 10) || 0;
    var low = state.min === "" ? null : parseFloat(state.min);
    var high = state.max === "" ? null : parseFloat(state.max);
    var chosen = [];
    for (var i = 0; i < items.length; i++) {
      var item = items[i];
      if (state.task && item.task !== state.task) continue;
      if (state.domain && item.domain !== state.domain) continue;
      if (low !== null || high !== null) {
        var value = primary(item, run);
        if (value === null || (low !== null && value < low) || (high !== null && value > high)) continue;
      }
      if (query && haystack(i).indexOf(query) < 0) continue;
      chosen.push(i);
    }
    var key = SORTS[state.sort];
    if (key) {
      var keys = {};
      chosen.forEach(function (i) { keys[i] = key(items[i]); });
      chosen.sort(function (a, b) {
        var x = keys[a], y = keys[b];
        if (x === null) return y === null ? a - b : 1;
        if (y === null) return -1;
        return x - y || a - b;
      });
    }
    timings.filter = performance.now() - started;
    return chosen;
  }

  // ---- diffs ------------------------------------------------------------------------------
  function diffWords(from, to) {
    var a = from.split(/\s+/).filter(Boolean), b = to.split(/\s+/).filter(Boolean);
    if (a.length * b.length > 400000) return null;
    var n = a.length, m = b.length, table = new Uint32Array((n + 1) * (m + 1));
    for (var i = n - 1; i >= 0; i--) {
      for (var j = m - 1; j >= 0; j--) {
        table[i * (m + 1) + j] = a[i] === b[j] ? table[(i + 1) * (m + 1) + j + 1] + 1 :
          Math.max(table[(i + 1) * (m + 1) + j], table[i * (m + 1) + j + 1]);
      }
    }
    var out = [], x = 0, y = 0;
    while (x < n && y < m) {
      if (a[x] === b[y]) { out.push(["=", a[x]]); x++; y++; }
      else if (table[(x + 1) * (m + 1) + y] >= table[x * (m + 1) + y + 1]) { out.push(["-", a[x]]); x++; }
      else { out.push(["+", b[y]]); y++; }
    }
    for (; x < n; x++) out.push(["-", a[x]]);
    for (; y < m; y++) out.push(["+", b[y]]);
    return out;
  }
  function diffNode(from, to) {
    var node = el("div", null, "diff"), ops = diffWords(from, to);
    if (ops === null) { node.textContent = to; return node; }
    ops.forEach(function (op) {
      var word = el(op[0] === "=" ? "span" : op[0] === "+" ? "ins" : "del", op[1]);
      node.appendChild(word);
      node.appendChild(document.createTextNode(" "));
    });
    return node;
  }

  // ---- one item ---------------------------------------------------------------------------
  function field(name, content) {
    var node = el("div", null, "field");
    node.appendChild(el("b", name + ": "));
    if (typeof content === "string") node.appendChild(document.createTextNode(content));
    else node.appendChild(content);
    return node;
  }
  function valuesLine(item) {
    var line = el("div", null, "values"), info = tasks[item.task];
    runs.forEach(function (run, r) {
      var values = item.values[r];
      if (!values) { line.appendChild(el("span", LABEL[r] + ": not in this run  ", "muted")); return; }
      var parts = Object.keys(values).map(function (k) {
        var v = values[k];
        return k + " " + (typeof v === "number" && Math.floor(v) !== v ? v.toFixed(3) : v);
      });
      line.appendChild(el("span", (two ? LABEL[r] + ": " : "") + parts.join(", ") + "  "));
    });
    var g = two ? gap(item) : null;
    if (g !== null) line.appendChild(el("span", "gap " + info.primary + " " + (g > 0 ? "+" : "") + g.toFixed(3), "gap " + (g > 0 ? "up" : g < 0 ? "down" : "")));
    return line;
  }
  function linesTable(item) {
    var table = el("table"), head = el("tr"), lines = (text(item.input) || "").split("\n");
    ["line", "text", "gold"].concat(runs.map(function (r, i) { return "p " + (two ? LABEL[i] : "yes"); }))
      .forEach(function (h) { head.appendChild(el("th", h)); });
    table.appendChild(head);
    var probabilities = item.predictions.map(function (p) { return p === null ? null : JSON.parse(text(p)); });
    (item.reference || []).forEach(function (gold, index) {
      var row = el("tr");
      row.appendChild(el("td", index));
      row.appendChild(el("td", lines[index] || ""));
      row.appendChild(el("td", gold));
      probabilities.forEach(function (values) {
        var p = values && values[index] !== undefined ? values[index] : null;
        row.appendChild(el("td", p === null ? "—" : Number(p).toFixed(3), p !== null && (p > 0.5 ? 1 : 0) !== gold ? "wrong" : ""));
      });
      table.appendChild(row);
    });
    return table;
  }
  function card(item) {
    var info = tasks[item.task], node = el("article", null, "item");
    node.appendChild(el("h3", info.display + " · " + item.id + (item.summ_idx !== null && item.summ_idx !== undefined ? " #" + item.summ_idx : "") + (item.domain ? " · " + item.domain : "")));
    node.appendChild(valuesLine(item));
    var input = el("details");
    input.appendChild(el("summary", "input"));
    input.appendChild(el("pre", text(item.input) || ""));
    node.appendChild(input);
    item.short.forEach(function (pair) { node.appendChild(field(pair[0], text(pair[1]))); });
    if (info.kind === "lines") { node.appendChild(linesTable(item)); return node; }
    if (info.kind === "fac") {
      node.appendChild(field("gold", item.reference === 1 ? "unsupported (label 1)" : "supported (label 0)"));
      item.predictions.forEach(function (p, r) {
        if (p !== null) node.appendChild(field("p(yes) " + (two ? LABEL[r] : ""), JSON.parse(text(p)).map(fixed).join(", ")));
      });
      return node;
    }
    var reference = text(item.reference) || "";
    node.appendChild(field("reference", reference));
    item.predictions.forEach(function (p, r) {
      if (p === null) return;
      node.appendChild(field("prediction" + (two ? " " + LABEL[r] : "") + " vs reference", diffNode(reference, text(p))));
    });
    if (two && item.predictions[0] !== null && item.predictions[1] !== null) {
      node.appendChild(field("B vs A", diffNode(text(item.predictions[0]), text(item.predictions[1]))));
    }
    return node;
  }

  // ---- the page ---------------------------------------------------------------------------
  function render() {
    var started = performance.now();
    var chosen = selected(), pages = Math.max(1, Math.ceil(chosen.length / PAGE));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    var list = $("items");
    list.textContent = "";
    chosen.slice(state.page * PAGE, (state.page + 1) * PAGE).forEach(function (i) { list.appendChild(card(items[i])); });
    $("count").textContent = chosen.length + " of " + items.length + " items" +
      (chosen.length > PAGE ? " (page " + (state.page + 1) + " of " + pages + ")" : "");
    var nav = $("pages");
    nav.textContent = "";
    if (pages > 1) {
      [["previous", state.page - 1], ["next", state.page + 1]].forEach(function (pair) {
        var button = el("button", pair[0]);
        button.disabled = pair[1] < 0 || pair[1] >= pages;
        button.addEventListener("click", function () { state.page = pair[1]; update(); window.scrollTo(0, 0); });
        nav.appendChild(button);
      });
    }
    $("note").textContent = (state.task ? taskNote(tasks[state.task]) :
      "Each task's items are valued by their own main value; pick a task to read how its score relates to them.") +
      (ignored.length ? " The link's " + ignored.join(", ") + " named nothing on this page and " +
        (ignored.length > 1 ? "were" : "was") + " ignored." : "");
    timings.render = performance.now() - started;
  }
  function update() { writeHash(); render(); }
  function taskNote(info) {
    var means = Object.keys(info.means).map(function (m) { return m === info.means[m] ? m : m + " (of " + info.means[m] + ")"; });
    return info.display + ": items valued by " + info.primary + ". " +
      (means.length ? "The task's " + means.join(", ") + (means.length > 1 ? " are means" : " is the mean") + " of the items' values; " : "") +
      info.note + ".";
  }

  function option(select, value, label) { var o = el("option", label); o.value = value; select.appendChild(o); }
  function controls() {
    var task = $("task"), domain = $("domain"), sort = $("sort"), rangeRun = $("range-run");
    option(task, "", "all tasks");
    Object.keys(tasks).sort().forEach(function (name) { option(task, name, tasks[name].display); });
    option(domain, "", "all domains");
    Array.from(new Set(items.map(function (i) { return i.domain; }).filter(Boolean))).sort()
      .forEach(function (d) { option(domain, d, d); });
    runs.forEach(function (run, r) { option(rangeRun, String(r), (two ? LABEL[r] + ": " : "") + run.name); });
    var sorts = [["order", "file order"], ["a-desc", "value, highest first"], ["a-asc", "value, lowest first"]];
    if (two) sorts = [["order", "file order"], ["a-desc", "A's value, highest first"], ["a-asc", "A's value, lowest first"],
      ["b-desc", "B's value, highest first"], ["b-asc", "B's value, lowest first"], ["gap-abs", "largest gap first"],
      ["gap-desc", "B ahead most first"], ["gap-asc", "A ahead most first"]];
    sorts.forEach(function (pair) { option(sort, pair[0], pair[1]); });
    var inputs = {task: task, domain: domain, run: rangeRun, min: $("min"), max: $("max"), q: $("search"), sort: sort};
    Object.keys(inputs).forEach(function (key) {
      inputs[key].value = state[key];
      inputs[key].addEventListener(key === "q" || key === "min" || key === "max" ? "input" : "change", function () {
        state[key] = inputs[key].value;
        state.page = 0;
        update();
      });
    });
  }
  function header() {
    var box = $("runs");
    runs.forEach(function (run, r) {
      box.appendChild(el("span", (two ? LABEL[r] + ": " : "") + run.name + " (" + Object.keys(run.scores).length + " tasks)", "run"));
    });
  }

  // ---- where two runs differ most ------------------------------------------------------------
  function summaryTable(title, groups) {
    var table = el("table"), head = el("tr");
    table.appendChild(el("caption", title));
    ["", "item value", "items", "mean A", "mean B", "mean gap"].forEach(function (h) { head.appendChild(el("th", h)); });
    table.appendChild(head);
    Object.keys(groups).sort(function (a, b) { return Math.abs(groups[b].gap) - Math.abs(groups[a].gap); })
      .forEach(function (name) {
        var g = groups[name], row = el("tr");
        [name, g.value || "(each task's)", g.n, fixed(g.a), fixed(g.b), (g.gap > 0 ? "+" : "") + fixed(g.gap)].forEach(function (v) { row.appendChild(el("td", v)); });
        table.appendChild(row);
      });
    return table;
  }
  function summary() {
    if (!two) return;
    var byTask = {}, byDomain = {}, both = [];
    items.forEach(function (item, i) {
      var a = primary(item, 0), b = primary(item, 1);
      if (a === null || b === null) return;
      both.push(i);
      [[byTask, tasks[item.task].display, tasks[item.task].primary], [byDomain, item.domain || "—", null]].forEach(function (pair) {
        var g = pair[0][pair[1]] || (pair[0][pair[1]] = {n: 0, a: 0, b: 0, gap: 0, value: pair[2]});
        g.n++; g.a += a; g.b += b;
      });
    });
    [byTask, byDomain].forEach(function (groups) {
      Object.keys(groups).forEach(function (k) { var g = groups[k]; g.a /= g.n; g.b /= g.n; g.gap = g.b - g.a; });
    });
    var box = el("details");
    box.open = true;
    $("summary").hidden = false;
    $("summary").appendChild(box);
    box.appendChild(el("summary", "Where the runs differ most (B − A, each task's main item value)"));
    box.appendChild(summaryTable("by task", byTask));
    box.appendChild(summaryTable("by domain", byDomain));
    var top = both.sort(function (x, y) { return Math.abs(gap(items[y])) - Math.abs(gap(items[x])); }).slice(0, 10);
    var list = el("ol");
    list.id = "top-gaps";
    top.forEach(function (i) {
      var item = items[i], entry = el("li"), button = el("button", tasks[item.task].display + " · " + item.id +
        (item.summ_idx !== null && item.summ_idx !== undefined ? " #" + item.summ_idx : "") + " (" + (gap(item) > 0 ? "+" : "") + gap(item).toFixed(3) + ")");
      button.addEventListener("click", function () {
        state.task = item.task; state.q = item.id; state.page = 0;
        $("task").value = state.task; $("search").value = state.q;
        update();
      });
      entry.appendChild(button);
      list.appendChild(entry);
    });
    box.appendChild(el("h3", "items"));
    box.appendChild(list);
  }

  var started = performance.now();
  readHash();
  header();
  controls();
  summary();
  render();
  timings.load = performance.now() - started;
  window.addEventListener("hashchange", function () { readHash(); render(); });
})();

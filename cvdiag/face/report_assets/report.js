/* cvdiag report: an index of tests and, per test, a waterfall of its events.
   No network, no libraries; every text from the log goes through textContent. */
(function () {
  "use strict";
  var IDX = JSON.parse(document.getElementById("cvdiag-index").textContent);
  var S = IDX.strings, META = IDX.meta, ROWS = IDX.rows;
  var C = {}; META.columns.forEach(function (name, i) { C[name] = i; });
  var E = {}; META.event_columns.forEach(function (name, i) { E[name] = i; });
  var SVGNS = "http://www.w3.org/2000/svg";
  var ROW_H = 28, SILENCE_MS = 1000;
  var app = document.getElementById("app");
  var tip = el("div", { class: "tip", hidden: "" }); document.body.appendChild(tip);

  // -- small helpers ---------------------------------------------------------------
  function el(tag, attrs, kids) {
    var n = document.createElement(tag);
    for (var k in attrs || {}) { if (attrs[k] !== null && attrs[k] !== undefined) n.setAttribute(k, attrs[k]); }
    (kids || []).forEach(function (c) { n.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return n;
  }
  function sv(tag, attrs, text) {
    var n = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) { if (attrs[k] !== null && attrs[k] !== undefined) n.setAttribute(k, attrs[k]); }
    if (text !== undefined) n.textContent = text;
    return n;
  }
  function ms(v) {
    if (v === null || v === undefined) return "";
    if (typeof v !== "number" || !isFinite(v)) return String(v); // a log may say anything
    if (v < 1000) return Math.round(v) + " ms";
    if (v < 60000) return (v / 1000).toFixed(v < 10000 ? 2 : 1) + " s";
    return (v / 60000).toFixed(1) + " min";
  }
  function plus(v) { return "+" + ms(v); }
  function isBad(cls) { return cls && cls !== "ok"; }
  function short(obj, limit) {
    if (!obj || typeof obj !== "object") return "";
    var parts = [];
    for (var k in obj) {
      var v = obj[k];
      if (v === null || v === undefined || v === "") continue;
      parts.push(k + "=" + (typeof v === "object" ? JSON.stringify(v) : String(v)));
    }
    var text = parts.join(" ");
    return text.length > limit ? text.slice(0, limit - 1) + "\u2026" : text;
  }

  // -- index: filter, sort, virtual rows ---------------------------------------------
  var state = { q: "", status: "all", cls: "all", sort: "status", dir: -1, sel: 0, shown: [] };
  var SORTS = {
    status: function (r) { return r[C.failed]; }, "class": function (r) { return S[r[C["class"]]]; },
    test: function (r) { return r[C.label] || r[C.id]; }, slug: function (r) { return S[r[C.slug]]; },
    duration: function (r) { return r[C.duration_ms]; }, ttfb: function (r) { return r[C.ttfb_ms]; },
    llm: function (r) { return r[C.llm_ms]; }, events: function (r) { return r[C.events]; },
    start: function (r) { return r[C.start_ms]; }
  };
  var COLUMNS = [
    ["status", "Status", "", "7%"], ["class", "Class", "", "14%"], ["test", "Test", "", "25%"], ["slug", "Slug", "", "10%"],
    ["duration", "Duration", "num", "9%"], ["ttfb", "First byte", "num", "9%"], ["llm", "LLM time", "num", "9%"],
    ["events", "Events", "num", "7%"], ["layers", "Layers", "", "10%"]
  ];

  // A session's tests are named by their pytest node ids, longer than ids: the Test
  // column takes the room the narrower columns can give, so that they are not cut.
  function columnWidths() {
    var named = ROWS.some(function (r) { return r[C.label]; });
    if (!named) return COLUMNS.map(function (c) { return c[3]; });
    // the others at the width their values need; the Test column takes what is left
    return ["64px", "132px", "auto", "72px", "76px", "80px", "76px", "56px", "80px"];
  }
  // The command that gives every test a waterfall, as it runs where the report was made
  // (META.all_command: pytest's option for a session's report).
  function howTo() { return META.all_command || "cvdiag report --all"; }

  function matches(r) {
    if (state.status === "failed" && !r[C.failed]) return false;
    if (state.status === "passed" && r[C.failed]) return false;
    if (state.cls !== "all" && S[r[C["class"]]] !== state.cls) return false;
    if (!state.q) return true;
    var hay = (r[C.id] + " " + (r[C.label] || "") + " " + S[r[C.slug]] + " " + S[r[C["class"]]] + " " + r[C.reason]).toLowerCase();
    return hay.indexOf(state.q) >= 0;
  }
  function compute() {
    var key = SORTS[state.sort] || SORTS.start, dir = state.dir;
    var shown = ROWS.filter(matches);
    shown.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (x === y) return a[C.start_ms] - b[C.start_ms];
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * dir;
    });
    state.shown = shown;
    if (state.sel >= shown.length) state.sel = Math.max(0, shown.length - 1);
  }

  var view = {};
  function renderIndex() {
    app.textContent = "";
    var failed = 0, counts = {};
    ROWS.forEach(function (r) { failed += r[C.failed]; var c = S[r[C["class"]]] || "(none)"; counts[c] = (counts[c] || 0) + 1; });
    var main = el("main", { id: "index" });
    main.appendChild(el("h1", {}, ["cvdiag report"]));
    var detailNote = META.detail === "all" ? "detail for every test" :
      "detail for failed and flagged tests (" + howTo() + " for every test)";
    main.appendChild(el("p", { class: "muted" }, [
      ROWS.length + (ROWS.length === 1 ? " test, " : " tests, ") + failed + " failed \u00b7 " + META.sources.join(", ") + " \u00b7 " + detailNote +
      (META.note ? " \u00b7 " + META.note : "")
    ]));
    if (IDX.compare) main.appendChild(compareBox(IDX.compare));
    var top = el("div", { class: "top" });
    var chips = el("div", { class: "chips", role: "group", "aria-label": "tests per class" });
    Object.keys(counts).sort(function (a, b) { return counts[b] - counts[a] || (a < b ? -1 : 1); }).forEach(function (c) {
      var b = el("button", { class: "chip", type: "button", "data-class": c, "aria-pressed": String(state.cls === c) }, [
        el("span", { class: "cls " + (c === "ok" ? "ok" : "bad") }, [(c === "ok" ? "\u2714 " : "\u2716 ") + c]),
        el("span", { class: "n" }, [String(counts[c])])
      ]);
      b.addEventListener("click", function () { state.cls = state.cls === c ? "all" : c; syncControls(); refresh(); });
      chips.appendChild(b);
    });
    var left = el("div", {}, [el("h2", {}, ["Classes"]), chips]);
    top.appendChild(left);
    top.appendChild(histogram());
    main.appendChild(top);

    var q = el("input", { type: "search", id: "q", placeholder: "filter: id, name, slug, class, reason", "aria-label": "filter tests" });
    q.value = state.q;
    q.addEventListener("input", function () { state.q = q.value.trim().toLowerCase(); state.sel = 0; refresh(); });
    var st = select("status", [["all", "all statuses"], ["failed", "failed"], ["passed", "passed"]], state.status);
    st.addEventListener("change", function () { state.status = st.value; state.sel = 0; refresh(); });
    var clsOpts = [["all", "all classes"]].concat(Object.keys(counts).sort().map(function (c) { return [c, c]; }));
    var cs = select("class", clsOpts, state.cls);
    cs.addEventListener("change", function () { state.cls = cs.value; state.sel = 0; syncControls(); refresh(); });
    var count = el("span", { class: "muted", id: "count", "aria-live": "polite" });
    main.appendChild(el("div", { class: "controls" }, [q, st, cs, count,
      el("span", { class: "muted" }, ["\u2191\u2193 move \u00b7 Enter opens \u00b7 Esc back"])]));

    var table = el("table", { class: "tests", role: "grid", "aria-label": "tests" });
    var colgroup = el("colgroup");
    var widths = columnWidths();
    COLUMNS.forEach(function (c, k) { colgroup.appendChild(el("col", { style: "width:" + widths[k] })); });
    table.appendChild(colgroup);
    var head = el("tr");
    COLUMNS.forEach(function (c) {
      var th = el("th", { class: c[2], scope: "col", "data-sort": c[0], "aria-sort": state.sort === c[0] ? (state.dir > 0 ? "ascending" : "descending") : "none" });
      var b = el("button", { type: "button" }, [c[1] + (state.sort === c[0] ? (state.dir > 0 ? " \u25b2" : " \u25bc") : "")]);
      if (c[0] !== "layers") b.addEventListener("click", function () {
        if (state.sort === c[0]) state.dir = -state.dir; else { state.sort = c[0]; state.dir = c[2] === "num" || c[0] === "status" ? -1 : 1; }
        refresh(); renderHead();
      });
      th.appendChild(b); head.appendChild(th);
    });
    table.appendChild(el("thead", {}, [head]));
    var body = el("tbody");
    table.appendChild(body);
    var grid = el("div", { class: "grid", id: "grid" }, [table]);
    grid.addEventListener("scroll", drawRows);
    grid.addEventListener("keydown", onGridKey);
    main.appendChild(grid);
    app.appendChild(main);
    view = { grid: grid, body: body, count: count, head: head, q: q, st: st, cs: cs, chips: chips };
    refresh();
  }
  function renderHead() {
    Array.prototype.forEach.call(view.head.children, function (th) {
      var key = th.getAttribute("data-sort"), on = state.sort === key, b = th.firstChild;
      th.setAttribute("aria-sort", on ? (state.dir > 0 ? "ascending" : "descending") : "none");
      b.textContent = b.textContent.replace(/ [\u25b2\u25bc]$/, "") + (on ? (state.dir > 0 ? " \u25b2" : " \u25bc") : "");
    });
  }
  function select(name, opts, value) {
    var s = el("select", { id: name, "aria-label": name });
    opts.forEach(function (o) { var opt = el("option", { value: o[0] }, [o[1]]); if (o[0] === value) opt.selected = true; s.appendChild(opt); });
    return s;
  }
  function syncControls() {
    if (!view.cs) return;
    view.cs.value = state.cls;
    Array.prototype.forEach.call(view.chips.children, function (b) { b.setAttribute("aria-pressed", String(b.getAttribute("data-class") === state.cls)); });
  }
  function refresh() {
    compute();
    view.count.textContent = "showing " + state.shown.length + " of " + ROWS.length;
    drawRows();
  }
  function drawRows() {
    var grid = view.grid, body = view.body, n = state.shown.length;
    var headH = 32, top = Math.max(0, grid.scrollTop - headH);
    var first = Math.max(0, Math.floor(top / ROW_H) - 10);
    var last = Math.min(n, first + Math.ceil(grid.clientHeight / ROW_H) + 20);
    body.textContent = "";
    if (first > 0) body.appendChild(el("tr", { style: "height:" + first * ROW_H + "px", "aria-hidden": "true" }));
    for (var i = first; i < last; i++) body.appendChild(rowEl(state.shown[i], i));
    if (last < n) body.appendChild(el("tr", { style: "height:" + (n - last) * ROW_H + "px", "aria-hidden": "true" }));
    if (!n) body.appendChild(el("tr", {}, [el("td", { colspan: String(COLUMNS.length), class: "muted" }, ["no test matches the filters"])]));
  }
  function rowEl(r, i) {
    var cls = S[r[C["class"]]], failed = r[C.failed];
    var tr = el("tr", { class: "row", "data-id": r[C.id], "data-i": String(i), tabindex: i === state.sel ? "0" : "-1",
      "aria-selected": String(i === state.sel), title: r[C.reason] || "" });
    var name = r[C.label] || r[C.id];
    var cells = [
      el("span", { class: "status " + (failed ? "fail" : "ok") }, [failed ? "\u2716 fail" : "\u2714 ok"]),
      el("span", { class: "cls " + (isBad(cls) ? "bad" : "ok") }, [cls || ""]),
      el("span", { class: r[C.label] ? "" : "mono", title: name }, [name]),
      S[r[C.slug]], ms(r[C.duration_ms]), ms(r[C.ttfb_ms]), ms(r[C.llm_ms]), String(r[C.events]),
      r[C.layers].map(function (x) { return S[x]; }).join(", ")
    ];
    cells.forEach(function (c, k) {
      tr.appendChild(el("td", { class: COLUMNS[k][2] }, [c]));
    });
    tr.addEventListener("click", function () { state.sel = i; open(r); });
    return tr;
  }
  function focusSel() {
    var g = view.grid, y = 32 + state.sel * ROW_H;
    if (y < g.scrollTop + 32) g.scrollTop = y - 32;
    else if (y + ROW_H > g.scrollTop + g.clientHeight) g.scrollTop = y + ROW_H - g.clientHeight;
    drawRows();
    var tr = view.body.querySelector('tr[data-i="' + state.sel + '"]');
    if (tr) tr.focus({ preventScroll: true }); // the grid scrolls itself; the page stays put
  }
  function onGridKey(e) {
    var n = state.shown.length, page = Math.max(1, Math.floor(view.grid.clientHeight / ROW_H) - 1);
    var moves = { ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page, Home: -n, End: n };
    if (e.key in moves && n) {
      e.preventDefault();
      state.sel = Math.min(n - 1, Math.max(0, state.sel + moves[e.key]));
      focusSel();
    } else if (e.key === "Enter" && n) {
      e.preventDefault(); open(state.shown[state.sel]);
    }
  }
  function open(r) { location.hash = "test=" + encodeURIComponent(r[C.id]); }

  // -- two tests side by side (cvdiag report --compare A B) -------------------------------
  function compareBox(cmp) {
    var box = el("section", { class: "compare", id: "compare", "aria-label": "comparison" });
    box.appendChild(el("h2", {}, ["Compare"]));
    [["A", cmp.a], ["B", cmp.b]].forEach(function (pair) {
      var r = byId(pair[1].test_id), link = el("button", { type: "button", class: "mono", "data-open": pair[1].test_id }, [pair[1].test_id]);
      if (r) link.addEventListener("click", function () { open(r); });
      box.appendChild(el("div", {}, [el("b", {}, [pair[0] + " "]), link, " \u00b7 " + pair[1].events + " events \u00b7 " + ms(pair[1].duration_ms) +
        (r ? " \u00b7 " + S[r[C["class"]]] : "")]));
    });
    var div = cmp.first_divergence;
    box.appendChild(el("p", { class: "divergence", id: "divergence" }, [div ? "\u25b6 first divergence: " + div.reason : "no divergence: the two tests did the same things"]));
    var table = el("table", { class: "events" });
    table.appendChild(el("thead", {}, [el("tr", {}, ["", "boundary", "A", "B", "differences"].map(function (h) { return el("th", {}, [h]); }))]));
    var body = el("tbody");
    function side(x) { return x ? plus(x.offset_ms) + " " + x.outcome + (x.detail ? " (" + x.detail + ")" : "") + (typeof x.duration_ms === "number" ? " \u00b7 " + ms(x.duration_ms) : "") : "\u2014"; }
    cmp.steps.forEach(function (st, i) {
      var here = div && div.index === i;
      body.appendChild(el("tr", { class: here ? "diverge" : st.differences.length ? "differs" : "" }, [
        el("td", {}, [here ? "\u25b6" : st.differences.length ? "\u2260" : "="]), el("td", { class: "mono" }, [st.boundary]),
        el("td", {}, [side(st.a)]), el("td", {}, [side(st.b)]), el("td", {}, [st.differences.join("; ")])]));
    });
    table.appendChild(body);
    box.appendChild(el("details", { open: "" }, [el("summary", {}, [cmp.steps.length + " aligned steps"]), table]));
    return box;
  }

  // -- the duration histogram ----------------------------------------------------------
  function histogram() {
    var durs = ROWS.map(function (r) { return r[C.duration_ms]; }).filter(function (d) { return d !== null && d !== undefined; });
    var box = el("div", { class: "hist" }, [el("h2", {}, ["Durations"])]);
    if (!durs.length) { box.appendChild(el("p", { class: "muted" }, ["no durations"])); return box; }
    var lo = Math.max(1, Math.min.apply(null, durs)), hi = Math.max(lo * 10, Math.max.apply(null, durs) + 1);
    var bins = 24, l0 = Math.log10(lo), l1 = Math.log10(hi), ok = [], bad = [];
    for (var b = 0; b < bins; b++) { ok.push(0); bad.push(0); }
    ROWS.forEach(function (r) {
      var d = r[C.duration_ms]; if (d === null || d === undefined) return;
      var k = Math.min(bins - 1, Math.max(0, Math.floor((Math.log10(Math.max(d, 1)) - l0) / (l1 - l0) * bins)));
      (r[C.failed] ? bad : ok)[k]++;
    });
    var W = 520, H = 150, pad = 22, top = Math.max.apply(null, ok.map(function (v, i) { return v + bad[i]; }));
    var svg = sv("svg", { class: "chart", width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "distribution of test durations, failed tests hatched" });
    svg.appendChild(defs());
    var bw = (W - 2 * pad) / bins;
    for (b = 0; b < bins; b++) {
      var hOk = (H - 2 * pad) * ok[b] / top, hBad = (H - 2 * pad) * bad[b] / top, x = pad + b * bw;
      var lo_b = Math.pow(10, l0 + (l1 - l0) * b / bins), hi_b = Math.pow(10, l0 + (l1 - l0) * (b + 1) / bins);
      var label = ms(lo_b) + " \u2013 " + ms(hi_b) + ": " + ok[b] + " ok, " + bad[b] + " failed";
      if (ok[b]) { var ro = sv("rect", { x: x + 1, y: H - pad - hOk, width: bw - 2, height: hOk, fill: "var(--ok)", opacity: "0.8" }); ro.appendChild(sv("title", {}, label)); svg.appendChild(ro); }
      if (bad[b]) { var rb = sv("rect", { x: x + 1, y: H - pad - hOk - hBad, width: bw - 2, height: hBad, fill: "url(#hatch-err)", stroke: "var(--err)" }); rb.appendChild(sv("title", {}, label)); svg.appendChild(rb); }
    }
    svg.appendChild(sv("line", { x1: pad, x2: W - pad, y1: H - pad, y2: H - pad, stroke: "var(--line)" }));
    [0, 0.5, 1].forEach(function (f) {
      var x = pad + f * (W - 2 * pad);
      svg.appendChild(sv("text", { x: x, y: H - 6, "text-anchor": f === 0 ? "start" : f === 1 ? "end" : "middle", fill: "var(--muted)", "font-size": "11" }, ms(Math.pow(10, l0 + (l1 - l0) * f))));
    });
    svg.appendChild(sv("text", { x: W - pad, y: 12, "text-anchor": "end", fill: "var(--muted)", "font-size": "11" }, "max " + top + " tests per bin (log scale of time)"));
    box.appendChild(svg);
    box.appendChild(el("div", { class: "legend" }, [legendSwatch("var(--ok)", null, "passed"), legendSwatch(null, "url(#hatch-err)", "failed (hatched)")]));
    return box;
  }
  function legendSwatch(fill, pattern, text) {
    var s = sv("svg", { width: 14, height: 12 });
    s.appendChild(defs());
    s.appendChild(sv("rect", { x: 1, y: 1, width: 12, height: 10, fill: fill || pattern, stroke: fill ? "none" : "var(--err)" }));
    return el("span", {}, [s, " " + text]);
  }
  // Patterns live once in a hidden SVG of their own: every chart refers to them by id,
  // and they survive the charts being redrawn.
  function defs() { return sv("defs"); }
  (function patterns() {
    var holder = sv("svg", { width: 0, height: 0, "aria-hidden": "true", style: "position:absolute" }), d = sv("defs");
    var p = sv("pattern", { id: "hatch-err", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
    p.appendChild(sv("rect", { width: 6, height: 6, fill: "var(--err)", opacity: "0.35" }));
    p.appendChild(sv("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "var(--err)", "stroke-width": 3 }));
    d.appendChild(p);
    var q = sv("pattern", { id: "silence", width: 8, height: 8, patternUnits: "userSpaceOnUse", patternTransform: "rotate(-45)" });
    q.appendChild(sv("line", { x1: 0, y1: 0, x2: 0, y2: 8, stroke: "var(--silence)", "stroke-width": 1.5, opacity: "0.7" }));
    d.appendChild(q);
    holder.appendChild(d);
    document.body.appendChild(holder);
  })();

  // -- one test ------------------------------------------------------------------------
  var detailCache = {};
  function detailOf(r) {
    var i = r[C.detail];
    if (i < 0) return null;
    if (!(i in detailCache)) {
      var node = document.getElementById("cvdiag-detail-" + i);
      if (!node) return undefined; // not parsed yet
      detailCache[i] = JSON.parse(node.textContent);
    }
    return detailCache[i];
  }
  function envelopeOf(d, r, ev) {
    var rest = ev[E.rest] || {}, env = {};
    var rebuilt = {
      schema_version: 1, test_id: r[C.id], trace_id: r[C.id], parent_span_id: null, layer: S[ev[E.layer]],
      boundary: S[ev[E.boundary]], slug: S[r[C.slug]].split(",")[0],
      ts: new Date(d.t0 + ev[E.t]).toISOString(), duration_ms: ev[E.duration_ms], outcome: S[ev[E.outcome]],
      edge_headers: {}, metadata: ev[E.metadata], _metadata_dropped: false, _truncated: false
    };
    META.edge_headers.forEach(function (h) { rebuilt.edge_headers[h] = null; });
    ["schema_version", "test_id", "trace_id", "span_id", "parent_span_id", "layer", "boundary", "slug", "demo", "ts",
      "mono_ns", "duration_ms", "outcome", "edge_headers", "metadata", "_metadata_dropped", "_truncated"].forEach(function (k) {
      if (k in rest) env[k] = rest[k]; else if (k in rebuilt) env[k] = rebuilt[k];
    });
    for (var k in rest) if (!(k in env)) env[k] = rest[k];
    return env;
  }

  function renderDetail(r) {
    app.textContent = "";
    var main = el("main", { id: "detail", "data-id": r[C.id] });
    var back = el("button", { type: "button", id: "back" }, ["\u2190 all tests"]);
    back.addEventListener("click", goBack);
    var pos = state.shown.indexOf(r);
    var prev = el("button", { type: "button", id: "prev" }, ["\u2039 previous"]);
    var next = el("button", { type: "button", id: "next" }, ["next \u203a"]);
    prev.disabled = pos <= 0; next.disabled = pos < 0 || pos >= state.shown.length - 1;
    prev.addEventListener("click", function () { step(-1); });
    next.addEventListener("click", function () { step(1); });
    main.appendChild(el("div", { class: "detail-head" }, [back, prev, next,
      el("span", { class: "muted" }, ["Esc back \u00b7 [ ] previous/next test \u00b7 \u2191\u2193 events"])]));
    main.appendChild(el("h1", { class: r[C.label] ? "" : "mono" }, [r[C.label] || r[C.id]]));
    var failed = r[C.failed];
    main.appendChild(el("p", { class: "muted" }, [
      el("span", { class: "status " + (failed ? "fail" : "ok") }, [failed ? "\u2716 fail" : "\u2714 ok"]),
      " \u00b7 id ", el("code", {}, [r[C.id]]), " \u00b7 slug " + S[r[C.slug]] + " \u00b7 " + ms(r[C.duration_ms]) +
      " \u00b7 " + r[C.events] + " events \u00b7 terminal " + S[r[C.terminal]]
    ]));
    var d = detailOf(r);
    if (d === undefined) {
      main.appendChild(el("p", { class: "note" }, ["loading\u2026"]));
      app.appendChild(main);
      document.addEventListener("DOMContentLoaded", route, { once: true });
      return;
    }
    main.appendChild(diagnosisBox(r, d));
    if (d === null) {
      main.appendChild(el("p", { class: "note", id: "no-detail" }, [
        "This report has no events for this test: it keeps them for failed and flagged tests. " +
        "Build it with `" + howTo() + "` to see every test's waterfall."]));
      app.appendChild(main);
      return;
    }
    main.appendChild(el("h2", {}, ["Waterfall"]));
    var wf = el("div", { class: "wf", id: "waterfall" });
    main.appendChild(legend());
    main.appendChild(wf);
    if (d.more) main.appendChild(el("p", { class: "note" }, [d.more + " more events of this test are not embedded (a report keeps at most " + d.events.length + ")."]));
    main.appendChild(el("div", { class: "envelope", id: "envelope", hidden: "" }));
    main.appendChild(el("h2", {}, ["Events"]));
    main.appendChild(eventTable(r, d));
    app.appendChild(main);
    drawWaterfall(wf, r, d);
    var onResize = debounce(function () { if (document.body.contains(wf)) drawWaterfall(wf, r, d); else window.removeEventListener("resize", onResize); }, 120);
    window.addEventListener("resize", onResize);
    back.focus();
  }
  function debounce(fn, wait) { var t; return function () { clearTimeout(t); t = setTimeout(fn, wait); }; }
  function step(k) {
    var pos = state.shown.indexOf(current);
    if (pos < 0) return;
    var n = pos + k;
    if (n >= 0 && n < state.shown.length) { state.sel = n; open(state.shown[n]); }
  }
  function goBack() { history.replaceState(null, "", location.pathname + location.search); route(); }

  function diagnosisBox(r, d) {
    var diag = d && d.diagnosis, cls = S[r[C["class"]]];
    var box = el("section", { class: "diag" + (isBad(cls) ? "" : " ok"), id: "diagnosis", "aria-label": "diagnosis" });
    box.appendChild(el("div", { class: "verdict" }, [(isBad(cls) ? "\u2716 " : "\u2714 ") + "verdict: " + (cls || "none") +
      (r[C.confidence] !== null && r[C.confidence] !== undefined ? "  (confidence " + Number(r[C.confidence]).toFixed(2) + ")" : "")]));
    box.appendChild(el("div", { class: "reason" }, [r[C.reason] || ""]));
    var facts = diag && diag.evidence;
    if (facts) {
      var grid = el("div", { class: "facts", id: "evidence" });
      Object.keys(facts).forEach(function (k) {
        var v = facts[k];
        if (v === null || v === undefined || v === "" || v === 0 || (typeof v === "object" && !Object.keys(v).length)) return;
        var text = typeof v === "object" ? short(v, 200) : String(v);
        grid.appendChild(el("div", { title: k + ": " + text }, [el("span", { class: "k" }, [k + " "]), text]));
      });
      box.appendChild(el("details", {}, [el("summary", {}, ["evidence"]), grid]));
    }
    return box;
  }

  function legend() {
    function item(draw, text) { var s = sv("svg", { width: 18, height: 14 }); draw(s); return el("span", {}, [s, " " + text]); }
    return el("div", { class: "legend" }, [
      item(function (s) { s.appendChild(sv("circle", { cx: 9, cy: 7, r: 4.5, fill: "var(--ok)" })); }, "ok"),
      item(function (s) { s.appendChild(crossPath(9, 7, 5, "var(--err)")); }, "err"),
      item(function (s) { s.appendChild(diamond(9, 7, 6, "var(--timeout)")); }, "timeout"),
      item(function (s) { s.appendChild(sv("rect", { x: 5, y: 3, width: 8, height: 8, fill: "none", stroke: "var(--info)", "stroke-width": 2 })); }, "info"),
      item(function (s) { s.appendChild(sv("line", { x1: 9, x2: 9, y1: 2, y2: 12, class: "tick", stroke: "var(--muted)", "stroke-width": 2 })); }, "SSE event / heartbeat"),
      item(function (s) { s.appendChild(sv("path", { d: "M3 3 L15 3 L9 12 Z", fill: "var(--fg)" })); }, "first token / first byte"),
      item(function (s) { s.appendChild(sv("rect", { x: 1, y: 2, width: 16, height: 10, fill: "url(#hatch-err)", stroke: "var(--err)" })); }, "failed bar"),
      item(function (s) { s.appendChild(sv("rect", { x: 1, y: 2, width: 16, height: 10, fill: "var(--tool)", opacity: "0.55" })); }, "tool call"),
      item(function (s) { s.appendChild(sv("rect", { x: 1, y: 1, width: 16, height: 12, fill: "url(#silence)" })); }, "silence over 1 s")
    ]);
  }
  function crossPath(x, y, r, color) {
    return sv("path", { d: "M" + (x - r) + " " + (y - r) + " L" + (x + r) + " " + (y + r) + " M" + (x + r) + " " + (y - r) + " L" + (x - r) + " " + (y + r), stroke: color, "stroke-width": 3, fill: "none" });
  }
  function diamond(x, y, r, color) {
    return sv("path", { d: "M" + x + " " + (y - r) + " L" + (x + r) + " " + y + " L" + x + " " + (y + r) + " L" + (x - r) + " " + y + " Z", fill: color });
  }

  // Rows of a lane, by boundary family. Terminals and their starts share the request row.
  var ROW_ORDER = ["request", "agent", "llm", "tool", "stream", "page", "other"];
  var ROW_NAMES = { request: "request", agent: "agent", llm: "LLM", tool: "calls", stream: "stream", page: "page", other: "other" };
  var STARTS = { "backend.request.ingress": "request", "aimock.request.ingress": "request", "probe.start": "request",
    "backend.agent.enter": "agent", "backend.llm.call.start": "llm", "backend.tool.call.start": "tool" };
  var ENDS = { "backend.response.complete": "request", "backend.sse.aborted": "request", "backend.error.caught": "request",
    "aimock.response.complete": "request", "aimock.response.aborted": "request", "probe.exit": "request",
    "backend.agent.exit": "agent", "backend.llm.call.response": "llm", "backend.tool.call.response": "tool" };
  // Tool calls get a lane of their own, under the backend's: what the agent's tools did.
  var TOOLS_LANE = "tools";
  function laneOf(ev) { var b = S[ev[E.boundary]]; return b.indexOf("backend.tool.") === 0 ? TOOLS_LANE : S[ev[E.layer]]; }
  function laneRank(layer) {
    var i = layer === TOOLS_LANE ? META.layers.indexOf("backend") + 0.5 : META.layers.indexOf(layer);
    return i < 0 ? 99 : i;
  }
  var TICKS = { "backend.sse.event": 1, "probe.sse.event": 1, "aimock.sse.chunk": 1, "backend.llm.call.heartbeat": 1 };
  function rowOf(b) {
    if (STARTS[b]) return STARTS[b];
    if (ENDS[b]) return ENDS[b];
    if (b.indexOf(".llm.") >= 0) return "llm";
    if (b.indexOf(".tool.") >= 0) return "tool";
    if (b.indexOf(".agent.") >= 0) return "agent";
    if (b.indexOf(".sse.") >= 0 || b.indexOf("chunk") >= 0 || b.indexOf("response.start") >= 0) return "stream";
    if (b.indexOf("probe.") === 0) return b.indexOf("network") >= 0 ? "request" : "page";
    if (b.indexOf("request") >= 0 || b.indexOf("response") >= 0 || b.indexOf("match") >= 0) return "request";
    return "other";
  }

  // Bars: each end event closes the latest open start of its kind before it; a start
  // never closed runs to the end of the test, dashed.
  function bars(evs, tEnd) {
    var open = {}, out = [];
    evs.forEach(function (ev, i) {
      var b = S[ev[E.boundary]], layer = laneOf(ev);
      if (STARTS[b]) { var k = layer + "/" + STARTS[b]; (open[k] = open[k] || []).push(i); return; }
      if (!ENDS[b]) return;
      var key = layer + "/" + ENDS[b], starts = open[key] || [], t = ev[E.t], dur = ev[E.duration_ms];
      if (b === "backend.error.caught" && !starts.length) return; // a follow-up of a terminal: a marker only
      var s = null, callId = (ev[E.metadata] || {}).call_id, same = -1;
      // a tool call's start is the one of its call id (calls run side by side)
      if (callId) for (var c = 0; c < starts.length; c++) if ((evs[starts[c]][E.metadata] || {}).call_id === callId) same = c;
      if (same >= 0) {
        s = starts.splice(same, 1)[0];
      } else if (starts.length) {
        // the start nearest to where the end says it began (t - duration), else the latest
        var want = typeof dur === "number" ? t - dur : t, best = starts.length - 1;
        for (var j = 0; j < starts.length; j++) if (Math.abs(evs[starts[j]][E.t] - want) < Math.abs(evs[starts[best]][E.t] - want)) best = j;
        s = starts.splice(best, 1)[0];
      }
      var t0 = s !== null ? evs[s][E.t] : (typeof dur === "number" ? t - dur : t);
      out.push({ row: ENDS[b], layer: layer, t0: t0, t1: t, start: s, end: i, outcome: S[ev[E.outcome]], open: false });
    });
    for (var k in open) open[k].forEach(function (s) {
      var ev = evs[s];
      out.push({ row: STARTS[S[ev[E.boundary]]], layer: laneOf(ev), t0: ev[E.t], t1: tEnd, start: s, end: null, outcome: "open", open: true });
    });
    return out;
  }
  function barLabel(bar, evs) {
    var end = bar.end !== null ? evs[bar.end] : null, md = end ? end[E.metadata] || {} : {}, b = end ? S[end[E.boundary]] : "";
    var start = bar.start !== null ? evs[bar.start][E.metadata] || {} : {};
    var dur = ms(bar.t1 - bar.t0);
    if (bar.open) return (bar.row === "llm" ? "no answer" : "no end") + " after " + dur;
    if (bar.row === "llm") {
      var a = md.attempt !== undefined && md.attempt !== null ? "attempt " + md.attempt : (md.model || start.model || "LLM call");
      // A provider's status says more than the client's exception class (HTTPStatusError).
      var why = md.http_status && md.http_status >= 400
        ? "HTTP " + md.http_status + (md.error_type ? " " + md.error_type : "")
        : md.error_class || md.error_type || "";
      return a + " \u00b7 " + dur + (why ? " \u00b7 " + why : "");
    }
    if (bar.row === "tool") {
      var server = md.server || start.server, where = [md.source || start.source, server ? "server " + server : ""].filter(Boolean).join(", ");
      var failed = bar.outcome === "err" || (bar.outcome === "timeout" && md.error_kind);
      return (md.tool_name || start.tool_name || "tool") + (where ? " (" + where + ")" : "") + " \u00b7 " + dur +
        (failed ? " \u00b7 " + (md.error_kind || bar.outcome) + (md.error_excerpt ? ": " + md.error_excerpt : "") : "");
    }
    if (bar.row === "agent") return (start.agent_name || "agent") + " \u00b7 " + dur + (md.terminal_outcome && md.terminal_outcome !== "ok" ? " \u00b7 " + md.terminal_outcome : "");
    if (/\.aborted$/.test(b)) return "aborted " + (md.termination_kind || "") + " after " + (md.bytes_before_abort !== undefined ? md.bytes_before_abort + " B, " : "") + dur;
    if (b === "backend.error.caught") return "error " + (md.exception_type || "") + " \u00b7 " + dur;
    if (md.http_status !== undefined && md.http_status !== null) return "HTTP " + md.http_status + " \u00b7 " + dur;
    if (md.terminal_outcome) return md.terminal_outcome + " \u00b7 " + dur;
    return dur;
  }
  function colorOf(outcome) {
    return outcome === "ok" ? "var(--ok)" : outcome === "err" ? "var(--err)" : outcome === "timeout" ? "var(--timeout)" : "var(--info)";
  }
  function barFill(bar) {
    if (bar.outcome === "err") return "url(#hatch-err)";
    if (bar.outcome === "timeout") return "var(--timeout)";
    return bar.row === "llm" ? "var(--llm)" : bar.row === "agent" ? "var(--agent)" : bar.row === "tool" ? "var(--tool)" : "var(--req)";
  }

  function niceStep(span, px) {
    var raw = span / Math.max(1, px / 110), p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
  }

  function drawWaterfall(box, r, d) {
    box.textContent = "";
    var evs = d.events, W = Math.max(720, box.clientWidth || 1000), L = 150, R = 24, plot = W - L - R;
    var tMin = 0, tMax = 1;
    evs.forEach(function (ev) {
      tMax = Math.max(tMax, ev[E.t]);
      if (ENDS[S[ev[E.boundary]]] && typeof ev[E.duration_ms] === "number") tMin = Math.min(tMin, ev[E.t] - ev[E.duration_ms]);
    });
    var span = tMax - tMin;
    tMax += span * 0.02; tMin -= span * 0.01;
    function x(t) { return L + (t - tMin) / (tMax - tMin) * plot; }
    var all = bars(evs, tMax - span * 0.02);
    // lanes: layers present, in the contract's order, then any other
    var layers = [];
    evs.forEach(function (ev) { var l = laneOf(ev); if (layers.indexOf(l) < 0) layers.push(l); });
    layers.sort(function (a, b) { return laneRank(a) - laneRank(b) || (a < b ? -1 : 1); });
    // rows per lane; LLM bars that overlap in time go on separate rows (retries sit side by side)
    var layout = [], y = 34, RH = 26;
    var rowY = {};
    layers.forEach(function (layer) {
      var used = {};
      evs.forEach(function (ev) { if (laneOf(ev) === layer) used[rowOf(S[ev[E.boundary]])] = 1; });
      var laneTop = y, rows = [];
      ROW_ORDER.forEach(function (row) {
        if (!used[row]) return;
        var mine = all.filter(function (b) { return b.layer === layer && b.row === row; });
        mine.sort(function (a, b) { return a.t0 - b.t0; });
        var tracks = [];
        mine.forEach(function (b) {
          var k = 0;
          while (k < tracks.length && tracks[k] > x(b.t0) - 2) k++;
          tracks[k] = x(b.t1);
          b.track = k;
        });
        var n = Math.max(1, tracks.length);
        rowY[layer + "/" + row] = { y: y, n: n };
        rows.push({ name: ROW_NAMES[row], y: y, n: n });
        y += n * RH;
      });
      layout.push({ layer: layer, top: laneTop, bottom: y, rows: rows });
      y += 10;
    });
    var H = y + 6;
    var svg = sv("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img",
      "aria-label": "waterfall of " + evs.length + " events in " + layers.length + " layers" });
    svg.appendChild(defs());
    // axis
    var axis = sv("g", { class: "axis" }), stepMs = niceStep(tMax - tMin, plot);
    for (var t = Math.ceil(tMin / stepMs) * stepMs; t <= tMax; t += stepMs) {
      axis.appendChild(sv("line", { x1: x(t), x2: x(t), y1: 22, y2: H - 4 }));
      axis.appendChild(sv("text", { x: x(t), y: 14, "text-anchor": "middle" }, t === 0 ? "0" : (t > 0 ? "+" : "") + ms(t)));
    }
    svg.appendChild(axis);
    // lanes
    layout.forEach(function (lane) {
      var g = sv("g", { class: "lane", "data-layer": lane.layer });
      g.appendChild(sv("rect", { class: "lane-bg", x: 0, y: lane.top - 3, width: W, height: lane.bottom - lane.top + 6, rx: 4 }));
      g.appendChild(sv("text", { class: "lane-label", x: 8, y: lane.top + 14 }, lane.layer));
      lane.rows.forEach(function (row) { g.appendChild(sv("text", { class: "row-label", x: 70, y: row.y + 17 }, row.name)); });
      svg.appendChild(g);
    });
    // silences: no event from any layer for over a second
    var times = evs.map(function (ev) { return ev[E.t]; }).sort(function (a, b) { return a - b; });
    for (var i = 1; i < times.length; i++) {
      var gap = times[i] - times[i - 1];
      if (gap > SILENCE_MS) {
        var sx = x(times[i - 1]), sw = x(times[i]) - sx;
        var sil = sv("g", { class: "silence-g", "data-gap-ms": String(Math.round(gap)) });
        sil.appendChild(sv("rect", { class: "silence", x: sx, y: 24, width: sw, height: H - 28 }));
        if (sw > 60) sil.appendChild(sv("text", { class: "silence-label", x: sx + sw / 2, y: H - 6, "text-anchor": "middle" }, ms(gap) + " silent"));
        sil.appendChild(sv("title", {}, "no event for " + ms(gap)));
        svg.appendChild(sil);
      }
    }
    // bars
    all.forEach(function (b) {
      var ry = rowY[b.layer + "/" + b.row];
      if (!ry) return;
      var by = ry.y + b.track * RH + 4, bx = x(b.t0), bw = Math.max(2, x(b.t1) - bx);
      var label = barLabel(b, evs);
      var g = sv("g", { class: "bar bar-" + b.row, "data-outcome": b.outcome, "data-label": label });
      // a tool call's bar shows its end event on hover (the failed call's excerpt)
      if (b.row === "tool" && b.end !== null) g.setAttribute("data-tip-ev", String(b.end));
      g.appendChild(sv("rect", { x: bx, y: by, width: bw, height: RH - 8, rx: 3, fill: barFill(b), opacity: b.outcome === "err" ? "1" : "0.55",
        stroke: b.open ? "var(--fg)" : b.outcome === "err" ? "var(--err)" : "none", "stroke-dasharray": b.open ? "4 3" : null }));
      // Inside a wide bar, else after it, cut short of the next bar on the same track.
      var inside = bw > 120, tx = inside ? bx + 6 : bx + bw + 6, anchor = "start", room;
      var next = all.filter(function (o) { return o !== b && o.layer === b.layer && o.row === b.row && o.track === b.track && o.t0 >= b.t1; })
        .reduce(function (m, o) { return Math.min(m, x(o.t0)); }, W - 4);
      room = inside ? bw - 12 : next - tx - 6;
      if (!inside && room < 60 && bx - L > 80) { tx = bx - 6; anchor = "end"; room = bx - L - 10; }
      var fit = Math.floor(room / 6.2), text = label.length > fit ? label.slice(0, Math.max(0, fit - 1)) + "\u2026" : label;
      if (fit > 3) g.appendChild(sv("text", { class: "bar-text", x: tx, y: by + 13, "text-anchor": anchor }, text));
      g.appendChild(sv("title", {}, label));
      svg.appendChild(g);
      if (b.row === "llm" && b.end !== null) {
        var md = evs[b.end][E.metadata] || {};
        if (typeof md.ttft_ms === "number") {
          var fx = x(b.t0 + md.ttft_ms);
          var ft = sv("path", { class: "first-token", d: "M" + (fx - 5) + " " + (by - 3) + " L" + (fx + 5) + " " + (by - 3) + " L" + fx + " " + (by + 6) + " Z", fill: "var(--fg)" });
          ft.appendChild(sv("title", {}, "first token after " + ms(md.ttft_ms)));
          svg.appendChild(ft);
        }
      }
    });
    // every event: a marker on its row (ticks for streams and heartbeats)
    var trackAt = function (layer, row, t) {
      var k = 0;
      all.forEach(function (b) { if (b.layer === layer && b.row === row && b.t0 <= t && t <= b.t1) k = b.track; });
      return k;
    };
    evs.forEach(function (ev, i) {
      var b = S[ev[E.boundary]], layer = laneOf(ev), row = rowOf(b), ry = rowY[layer + "/" + row];
      if (!ry) return;
      var cy = ry.y + trackAt(layer, row, ev[E.t]) * RH + RH / 2, cx = x(ev[E.t]), outcome = S[ev[E.outcome]], m;
      if (TICKS[b]) {
        m = sv("line", { x1: cx, x2: cx, y1: cy - 8, y2: cy + 8, class: b.indexOf("heartbeat") >= 0 ? "hb" : "tick" });
        if (b.indexOf("heartbeat") >= 0) m.setAttribute("stroke-width", "2");
      } else if (b === "backend.sse.first_byte" || b === "probe.dom.firsttoken") {
        svg.appendChild(sv("line", { class: "guide", x1: cx, x2: cx, y1: 24, y2: H - 4 }));
        // first byte to the right of its guide, first token to the left: they are often close
        var left = b === "probe.dom.firsttoken" ? cx > L + 70 : cx > W - 90;
        svg.appendChild(sv("text", { x: left ? cx - 4 : cx + 4, y: 32, "font-size": "10", "text-anchor": left ? "end" : "start" },
          b === "backend.sse.first_byte" ? "first byte" : "first token"));
        m = sv("path", { d: "M" + (cx - 6) + " " + (cy - 7) + " L" + (cx + 6) + " " + (cy - 7) + " L" + cx + " " + (cy + 5) + " Z", fill: "var(--fg)" });
      } else if (outcome === "err") {
        m = crossPath(cx, cy, 5, "var(--err)");
      } else if (outcome === "timeout") {
        m = diamond(cx, cy, 6, "var(--timeout)");
      } else if (outcome === "ok") {
        m = sv("circle", { cx: cx, cy: cy, r: 5, fill: "var(--ok)", stroke: "var(--bg)", "stroke-width": 1 });
      } else {
        m = sv("rect", { x: cx - 4, y: cy - 4, width: 8, height: 8, fill: "var(--bg)", stroke: "var(--info)", "stroke-width": 2 });
      }
      m.setAttribute("class", ((m.getAttribute("class") || "") + " ev").trim());
      m.setAttribute("data-ev", String(i));
      m.setAttribute("data-boundary", b);
      svg.appendChild(m);
    });
    svg.addEventListener("mousemove", function (e) {
      var t = e.target.closest && e.target.closest("[data-ev], [data-tip-ev]");
      if (!t) { tip.hidden = true; return; }
      var ev = evs[+(t.getAttribute("data-ev") || t.getAttribute("data-tip-ev"))];
      tip.textContent = "";
      tip.appendChild(el("b", {}, [S[ev[E.boundary]] + " \u00b7 " + S[ev[E.outcome]]]));
      tip.appendChild(el("div", {}, [plus(ev[E.t]) + (typeof ev[E.duration_ms] === "number" ? " \u00b7 took " + ms(ev[E.duration_ms]) : "")]));
      var excerpt = (ev[E.metadata] || {}).error_excerpt;
      if (excerpt) tip.appendChild(el("div", { class: "tip-error" }, [String(excerpt)]));
      var md = short(ev[E.metadata], 300);
      if (md) tip.appendChild(el("div", { class: "mono" }, [md]));
      tip.appendChild(el("div", { class: "muted" }, ["click for the envelope"]));
      tip.hidden = false;
      tip.style.left = Math.min(e.clientX + 14, window.innerWidth - 470) + "px";
      tip.style.top = (e.clientY + 14) + "px";
    });
    svg.addEventListener("mouseleave", function () { tip.hidden = true; });
    svg.addEventListener("click", function (e) {
      var t = e.target.closest && e.target.closest("[data-ev]");
      if (t) selectEvent(+t.getAttribute("data-ev"), true);
    });
    box.appendChild(svg);
    if (selected !== null) markSelected(selected);
  }

  var selected = null, current = null, currentDetail = null;
  function eventTable(r, d) {
    var table = el("table", { class: "events", id: "events", role: "grid", "aria-label": "events" });
    table.appendChild(el("thead", {}, [el("tr", {}, ["t", "layer", "boundary", "outcome", "duration", "metadata"].map(function (h) { return el("th", {}, [h]); }))]));
    var body = el("tbody");
    var prev = null;
    d.events.forEach(function (ev, i) {
      var outcome = S[ev[E.outcome]];
      if (prev !== null && ev[E.t] - prev > SILENCE_MS) {
        body.appendChild(el("tr", { class: "gap", "aria-hidden": "true" }, [el("td", { colspan: "6", class: "muted" }, ["\u00b7\u00b7\u00b7 no event for " + ms(ev[E.t] - prev)])]));
      }
      prev = prev === null ? ev[E.t] : Math.max(prev, ev[E.t]);
      var tr = el("tr", { "data-ev": String(i), tabindex: i === 0 ? "0" : "-1", "aria-selected": "false" }, [
        el("td", { class: "num" }, [plus(ev[E.t])]), el("td", {}, [S[ev[E.layer]]]), el("td", { class: "mono" }, [S[ev[E.boundary]]]),
        el("td", { class: "out-" + outcome }, [{ ok: "\u25cf ok", err: "\u2716 err", timeout: "\u25c6 timeout" }[outcome] || "\u25a1 " + outcome]),
        el("td", { class: "num" }, [ms(ev[E.duration_ms])]), el("td", { class: "md mono", title: short(ev[E.metadata], 2000) }, [short(ev[E.metadata], 160)])
      ]);
      tr.addEventListener("click", function () { selectEvent(i, false); });
      body.appendChild(tr);
    });
    body.addEventListener("keydown", function (e) {
      var rows = body.querySelectorAll("tr[data-ev]"), here = e.target.closest && e.target.closest("tr[data-ev]");
      var at = here ? +here.getAttribute("data-ev") : selected === null ? -1 : selected;
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        var n = Math.min(rows.length - 1, Math.max(0, at + (e.key === "ArrowDown" ? 1 : -1)));
        selectEvent(n, false); rows[n].focus();
      } else if (e.key === "Enter") {
        var tr = e.target.closest("tr[data-ev]"); if (tr) { e.preventDefault(); selectEvent(+tr.getAttribute("data-ev"), false); }
      }
    });
    table.appendChild(body);
    return table;
  }
  function selectEvent(i, fromChart) {
    selected = i;
    markSelected(i);
    var ev = currentDetail.events[i], box = document.getElementById("envelope");
    box.textContent = "";
    box.appendChild(el("b", {}, ["envelope " + (i + 1) + " of " + currentDetail.events.length + ": " + S[ev[E.boundary]]]));
    box.appendChild(el("pre", { id: "envelope-json" }, [JSON.stringify(envelopeOf(currentDetail, current, ev), null, 2)]));
    box.hidden = false;
    if (!fromChart) box.scrollIntoView({ block: "nearest" });
  }
  function markSelected(i) {
    Array.prototype.forEach.call(document.querySelectorAll(".sel"), function (n) { n.classList.remove("sel"); });
    Array.prototype.forEach.call(document.querySelectorAll('#events tr[aria-selected="true"]'), function (n) { n.setAttribute("aria-selected", "false"); n.tabIndex = -1; });
    var m = document.querySelector('#waterfall [data-ev="' + i + '"]');
    if (m) m.classList.add("sel");
    var tr = document.querySelector('#events tr[data-ev="' + i + '"]');
    if (tr) { tr.setAttribute("aria-selected", "true"); tr.tabIndex = 0; }
  }

  // -- routing and keys --------------------------------------------------------------
  function byId(id) { for (var i = 0; i < ROWS.length; i++) if (ROWS[i][C.id] === id) return ROWS[i]; return null; }
  function route() {
    tip.hidden = true;
    var m = /^#test=(.*)$/.exec(location.hash), r = null;
    if (m) { try { r = byId(decodeURIComponent(m[1])); } catch (e) { r = null; } }  // a hand-edited, malformed hash: the index
    if (r) {
      current = r; currentDetail = detailOf(r) || null; selected = null;
      var pos = state.shown.indexOf(r); if (pos >= 0) state.sel = pos;
      renderDetail(r);
    } else {
      current = null;
      renderIndex();
      focusSel();
    }
  }
  document.addEventListener("keydown", function (e) {
    if (!current) return;
    var tag = (e.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "select") return;
    if (e.key === "Escape") { e.preventDefault(); goBack(); }
    else if (e.key === "[") step(-1);
    else if (e.key === "]") step(1);
  });
  window.addEventListener("hashchange", route);
  compute();
  route();
  window.__cvdiagRendered = performance.now();
})();

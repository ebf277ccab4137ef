/* kiln dashboard: draws the inspect (and profile) JSON embedded in the page.
 * No framework, nothing fetched. Every text from the data goes through
 * textContent / createTextNode, never innerHTML. */
"use strict";
(function () {
  var errors = [];
  window.onerror = function (msg, src, line) { errors.push(String(msg) + " @" + line); };
  window.addEventListener("unhandledrejection", function (e) { errors.push("rejection: " + e.reason); });
  var SVGNS = "http://www.w3.org/2000/svg";
  var drawn = {};

  function readJson(id) {
    var el = document.getElementById(id);
    if (!el) return null;
    try { return JSON.parse(el.textContent); } catch (e) { errors.push(id + ": " + e); return null; }
  }
  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(v) { return typeof v === "number" && isFinite(v) ? v : null; }
  function fmt(v, unit) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    var pre = ["", "K", "M", "G", "T"], i = 0, a = Math.abs(v);
    while (a >= 1000 && i < pre.length - 1) { a /= 1000; v /= 1000; i++; }
    return (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toPrecision(3)) + " " + pre[i] + (unit || "");
  }
  function fmtUs(v) { return v === null ? "-" : v >= 1000 ? (v / 1000).toPrecision(3) + " ms" : v.toPrecision(3) + " us"; }

  var insp = readJson("kiln-inspect") || {};
  var prof = readJson("kiln-profile");
  var machine = (prof && prof.machine) || insp.machine || null;
  var raw = Array.isArray(insp.step_list) ? insp.step_list : (prof && Array.isArray(prof.steps) ? prof.steps : []);
  var profSteps = prof && Array.isArray(prof.steps) ? prof.steps : [];
  var profByName = {};
  profSteps.forEach(function (p, i) { profByName[p.name !== undefined ? p.name : "#" + i] = p; });

  /* one record per step, from inspect, completed by the profile */
  var steps = raw.map(function (s, i) {
    var p = profByName[s.name] || profSteps[i] || null;
    if (p && p.name !== undefined && s.name !== undefined && p.name !== s.name) p = profByName[s.name] || null;
    var io = s.io || {};
    var bytesLv = io.bytes || (p && p.io_bytes) || {};
    var measured = p ? num(p.median_us) : num(s.measured_us);
    var predicted = num(io.predicted_us);
    if (predicted === null && p) predicted = num(p.predicted_us);
    var flops = num(s.flops) || 0;
    var bytes = (num(s.bytes_read) || 0) + (num(s.bytes_written) || 0);
    return {
      i: i, name: String(s.name !== undefined ? s.name : "step " + i), op: String(s.op || "?"), src: s, prof: p,
      measured: measured, predicted: predicted, time: measured !== null ? measured : predicted,
      flops: flops, bytes: bytes, levels: bytesLv,
      intensity: num(io.intensity) !== null ? io.intensity : (p && num(p.intensity)) || (bytes ? flops / bytes : 0),
      bound: io.bound || (p && p.bound) || "unknown",
      inputs: Array.isArray(s.inputs) ? s.inputs : [],
      outputs: Array.isArray(s.outputs) ? s.outputs : [],
      arena: p ? num(p.arena_live_bytes) : null
    };
  });
  var haveMeasured = steps.some(function (s) { return s.measured !== null; });

  /* ---- header ---- */
  $("title").textContent = "kiln " + (prof ? "profile" : "inspect") + ": " + (insp.model || (prof && prof.model) || "");
  var sum = [];
  sum.push(steps.length + " steps");
  if (num(insp.onnx_nodes) !== null) sum.push(insp.onnx_nodes + " ONNX nodes");
  if (num(insp.flops) !== null) sum.push(fmt(insp.flops, "FLOP") + " per run");
  if (num(insp.weights_bytes) !== null) sum.push("weights " + fmt(insp.weights_bytes, "B"));
  if (num(insp.arena_bytes) !== null) sum.push("arena " + fmt(insp.arena_bytes, "B"));
  var tot = steps.reduce(function (a, s) { return a + (s.time || 0); }, 0);
  sum.push((haveMeasured ? "measured " : "predicted ") + fmtUs(tot) + " (sum of steps)");
  if (prof && prof.latency_ms && num(prof.latency_ms.median) !== null) sum.push("latency median " + prof.latency_ms.median.toPrecision(3) + " ms");
  if (machine) sum.push(String(machine.cpu || "") + (machine.cores ? ", " + machine.cores + " cores" : ""));
  $("summary").textContent = sum.join(" \u00b7 ");

  /* ---- colours ---- */
  var LEVEL_COLORS = { REG: "#6a1b9a", registers: "#6a1b9a", L1: "#2e7d32", L2: "#1565c0", L3: "#ef6c00", DRAM: "#c62828" };
  function levelColor(n) { return LEVEL_COLORS[n] || "#555"; }
  function metric(s, m) { return m === "bytes" ? s.bytes : m === "intensity" ? s.intensity : s.time || 0; }
  function colorScale(m) {
    var vals = steps.map(function (s) { return metric(s, m); }).filter(function (v) { return v > 0; });
    var lo = Math.min.apply(null, vals.concat([1])), hi = Math.max.apply(null, vals.concat([1]));
    if (vals.length) { lo = Math.min.apply(null, vals); hi = Math.max.apply(null, vals); }
    var l0 = Math.log(lo || 1), l1 = Math.log(hi || 1);
    return function (v) {
      if (!(v > 0)) return "#eceff1";
      var t = l1 > l0 ? (Math.log(v) - l0) / (l1 - l0) : 0.5;
      return "hsl(" + (220 - 220 * t).toFixed(0) + ",75%," + (80 - 25 * t).toFixed(0) + "%)";
    };
  }

  /* ---- details ---- */
  var selected = null, nodeEls = [];
  function showDetails(s) {
    var d = $("details");
    d.textContent = "";
    if (!s) { d.textContent = "Click a step."; return; }
    if (selected !== null && nodeEls[selected]) nodeEls[selected].classList.remove("sel");
    selected = s.i;
    if (nodeEls[s.i]) nodeEls[s.i].classList.add("sel");
    d.appendChild(el("h3", {}, "#" + s.i + " " + s.name));
    var t = el("table");
    function row(k, v) { var r = el("tr"); r.appendChild(el("td", {}, k)); r.appendChild(el("td", {}, v)); t.appendChild(r); }
    var src = s.src, io = src.io || {};
    row("op", s.op + (src.domain ? " (" + src.domain + ")" : ""));
    row("ONNX nodes", Array.isArray(src.onnx_nodes) ? src.onnx_nodes.join(", ") : "-");
    row("tactic", src.tactic || "reference");
    row("tiling", src.tiling || "-");
    row("layout", src.layout || io.layout || "-");
    row("inputs", s.inputs.join(", ") || "-");
    s.outputs.forEach(function (o) {
      row("output", String(o.name) + " " + String(o.dtype || "") + " [" + (Array.isArray(o.shape) ? o.shape.join("x") : "?") + "]");
    });
    row("FLOPs", fmt(s.flops, "FLOP"));
    row("bytes read / written", fmt(num(src.bytes_read), "B") + " / " + fmt(num(src.bytes_written), "B"));
    Object.keys(s.levels).forEach(function (k) { row("bytes " + k, fmt(num(s.levels[k]), "B")); });
    row("intensity", s.intensity ? s.intensity.toPrecision(3) + " FLOP/B" : "-");
    row("predicted", fmtUs(s.predicted) + (io.threads ? " on " + io.threads + " thread(s)" : ""));
    row("measured", fmtUs(s.measured));
    if (s.prof) {
      row("mean / min", fmtUs(num(s.prof.mean_us)) + " / " + fmtUs(num(s.prof.min_us)));
      row("achieved", fmt(num(s.prof.gflops) !== null ? s.prof.gflops * 1e9 : null, "FLOP/s") + ", " + fmt(num(s.prof.gbs) !== null ? s.prof.gbs * 1e9 : null, "B/s"));
    }
    row("bound", s.bound);
    if (src.diagram) row("diagram", "see the fused steps section");
    d.appendChild(t);
  }

  /* ---- graph: longest-path layers, barycentric ordering ---- */
  function drawGraph() {
    var producer = {};
    steps.forEach(function (s) { s.outputs.forEach(function (o) { if (o && o.name !== undefined) producer[String(o.name)] = s.i; }); });
    var preds = steps.map(function () { return []; }), succs = steps.map(function () { return []; });
    var edges = [];
    steps.forEach(function (s) {
      s.inputs.forEach(function (n) {
        var p = producer[String(n)];
        if (p !== undefined && p !== s.i && preds[s.i].indexOf(p) < 0) { preds[s.i].push(p); succs[p].push(s.i); edges.push([p, s.i]); }
      });
    });
    /* longest path from the sources; steps are in execution order, but do
     * not rely on it: relax until stable (bounded by the step count) */
    var layer = steps.map(function () { return 0; });
    for (var pass = 0, changed = true; changed && pass <= steps.length; pass++) {
      changed = false;
      edges.forEach(function (e) { if (layer[e[1]] < layer[e[0]] + 1) { layer[e[1]] = layer[e[0]] + 1; changed = true; } });
    }
    var nl = 0; layer.forEach(function (l) { nl = Math.max(nl, l + 1); });
    var layers = []; for (var l = 0; l < nl; l++) layers.push([]);
    steps.forEach(function (s) { layers[layer[s.i]].push(s.i); });
    var pos = {};
    function index() { layers.forEach(function (L) { L.forEach(function (v, k) { pos[v] = k - L.length / 2; }); }); }
    index();
    for (var it = 0; it < 8; it++) {
      var down = it % 2 === 0;
      for (var li = down ? 1 : nl - 2; down ? li < nl : li >= 0; li += down ? 1 : -1) {
        var bc = {};
        layers[li].forEach(function (v) {
          var nb = down ? preds[v] : succs[v];
          bc[v] = nb.length ? nb.reduce(function (a, u) { return a + pos[u]; }, 0) / nb.length : pos[v];
        });
        layers[li].sort(function (a, b) { return bc[a] - bc[b] || a - b; });
        layers[li].forEach(function (v, k) { pos[v] = k - layers[li].length / 2; });
      }
    }
    var W = 150, H = 30, GX = 20, GY = 34, maxw = 1;
    layers.forEach(function (L) { maxw = Math.max(maxw, L.length); });
    var xy = {};
    layers.forEach(function (L, li) {
      L.forEach(function (v, k) { xy[v] = { x: (k + (maxw - L.length) / 2) * (W + GX) + 10, y: li * (H + GY) + 10 }; });
    });
    var width = maxw * (W + GX) + 20, height = nl * (H + GY) + 20;
    var svg = sv("svg", { id: "graph-svg", viewBox: "0 0 " + width + " " + Math.max(height, 100) });
    var g = sv("g");
    svg.appendChild(g);
    edges.forEach(function (e) {
      var a = xy[e[0]], b = xy[e[1]];
      var x1 = a.x + W / 2, y1 = a.y + H, x2 = b.x + W / 2, y2 = b.y, my = (y1 + y2) / 2;
      g.appendChild(sv("path", { "class": "edge", d: "M" + x1 + "," + y1 + " C" + x1 + "," + my + " " + x2 + "," + my + " " + x2 + "," + y2 }));
    });
    nodeEls = [];
    steps.forEach(function (s) {
      var p = xy[s.i];
      var n = sv("g", { "class": "node", transform: "translate(" + p.x + "," + p.y + ")", "data-step": s.i });
      n.appendChild(sv("rect", { width: W, height: H, rx: 4 }));
      n.appendChild(sv("title", {}, s.name + " (" + s.op + ")"));
      n.appendChild(sv("text", { x: 4, y: 12 }, s.op.slice(0, 18)));
      n.appendChild(sv("text", { x: W - 4, y: 12, "text-anchor": "end", "font-weight": 600 }, fmtUs(s.time)));
      var nm = s.name.length > 26 ? "\u2026" + s.name.slice(-25) : s.name;
      n.appendChild(sv("text", { x: 4, y: 25, fill: "#333" }, nm));
      n.addEventListener("click", function (ev) { ev.stopPropagation(); showDetails(s); });
      g.appendChild(n);
      nodeEls[s.i] = n;
    });
    $("graph").appendChild(svg);
    /* pan and zoom on the viewBox */
    var vb = [0, 0, width, Math.max(height, 100)];
    if (vb[3] > vb[2] * 0.6) vb[3] = Math.max(vb[2] * 0.6, 200); /* tall graphs: start at the top, scroll by dragging */
    function setVb() { svg.setAttribute("viewBox", vb.join(" ")); }
    setVb();
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var r = svg.getBoundingClientRect(), f = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
      var mx = vb[0] + (ev.clientX - r.left) / r.width * vb[2], my = vb[1] + (ev.clientY - r.top) / r.height * vb[3];
      vb = [mx - (mx - vb[0]) * f, my - (my - vb[1]) * f, vb[2] * f, vb[3] * f];
      setVb();
    }, { passive: false });
    var drag = null;
    svg.addEventListener("mousedown", function (ev) { drag = [ev.clientX, ev.clientY, vb[0], vb[1]]; });
    window.addEventListener("mouseup", function () { drag = null; });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var r = svg.getBoundingClientRect();
      vb[0] = drag[2] - (ev.clientX - drag[0]) / r.width * vb[2];
      vb[1] = drag[3] - (ev.clientY - drag[1]) / r.height * vb[3];
      setVb();
    });
    function recolor() {
      var m = $("color-by").value, c = colorScale(m);
      steps.forEach(function (s) { nodeEls[s.i].firstChild.setAttribute("fill", c(metric(s, m))); });
      $("legend").textContent = "colour: " + m + " (log scale, blue low, red high)";
    }
    $("color-by").addEventListener("change", recolor);
    recolor();
    drawn.graph = { nodes: steps.length, edges: edges.length, layers: nl };
  }

  /* ---- bottlenecks ---- */
  function boundText(b) {
    if (b === "compute") return "compute-bound";
    if (b === "overhead") return "overhead-bound";
    if (b === "L1" || b === "L2" || b === "L3" || b === "DRAM") return "bandwidth-bound (" + b + ")";
    return String(b);
  }
  function drawBottlenecks() {
    var ol = $("bottlenecks");
    var ranked = steps.slice().sort(function (a, b) { return (b.time || 0) - (a.time || 0); }).slice(0, 15);
    ranked.forEach(function (s) {
      var li = el("li");
      li.appendChild(el("span", { "class": "bound" }, boundText(s.bound)));
      li.appendChild(document.createTextNode(" " + fmtUs(s.time) + (tot ? " (" + (100 * (s.time || 0) / tot).toFixed(1) + "%)" : "") +
        " #" + s.i + " " + s.name + " \u2014 " + s.op + ", " + (s.src.tactic || "reference") +
        ", " + (s.intensity ? s.intensity.toPrecision(3) : "-") + " FLOP/B"));
      li.addEventListener("click", function () { showDetails(s); });
      ol.appendChild(li);
    });
    if (!ranked.length) ol.appendChild(el("li", { "class": "missing" }, "no steps"));
    drawn.bottlenecks = ranked.length;
    drawn.ranked_by = haveMeasured ? "measured" : "predicted";
  }

  /* ---- charts ---- */
  function chart(w, h) { return sv("svg", { "class": "chart", width: w, height: h, viewBox: "0 0 " + w + " " + h }); }
  function logAxes(svg, box, xr, yr, xl, yl) {
    var lx0 = Math.log10(xr[0]), lx1 = Math.log10(xr[1]), ly0 = Math.log10(yr[0]), ly1 = Math.log10(yr[1]);
    var X = function (v) { return box.x + (Math.log10(v) - lx0) / (lx1 - lx0) * box.w; };
    var Y = function (v) { return box.y + box.h - (Math.log10(v) - ly0) / (ly1 - ly0) * box.h; };
    for (var e = Math.ceil(lx0); e <= Math.floor(lx1); e++) {
      svg.appendChild(sv("line", { "class": "grid", x1: X(Math.pow(10, e)), x2: X(Math.pow(10, e)), y1: box.y, y2: box.y + box.h }));
      svg.appendChild(sv("text", { x: X(Math.pow(10, e)), y: box.y + box.h + 12, "text-anchor": "middle" }, "1e" + e));
    }
    for (e = Math.ceil(ly0); e <= Math.floor(ly1); e++) {
      svg.appendChild(sv("line", { "class": "grid", y1: Y(Math.pow(10, e)), y2: Y(Math.pow(10, e)), x1: box.x, x2: box.x + box.w }));
      svg.appendChild(sv("text", { x: box.x - 4, y: Y(Math.pow(10, e)) + 3, "text-anchor": "end" }, "1e" + e));
    }
    svg.appendChild(sv("rect", { x: box.x, y: box.y, width: box.w, height: box.h, fill: "none", stroke: "#888" }));
    svg.appendChild(sv("text", { x: box.x + box.w / 2, y: box.y + box.h + 26, "text-anchor": "middle" }, xl));
    svg.appendChild(sv("text", { x: 12, y: box.y + box.h / 2, transform: "rotate(-90 12 " + (box.y + box.h / 2) + ")", "text-anchor": "middle" }, yl));
    return { X: X, Y: Y };
  }
  function range(vals, pad) {
    vals = vals.filter(function (v) { return v > 0 && isFinite(v); });
    if (!vals.length) return [0.1, 10];
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    return [Math.pow(10, Math.floor(Math.log10(lo) - (pad || 0))), Math.pow(10, Math.ceil(Math.log10(hi) + (pad || 0)) + (hi === lo ? 1 : 0))];
  }

  function drawBars() {
    var n = steps.length, bh = 12, w = 900, left = 260, h = n * bh + 30;
    var svg = chart(w, h), mx = 0;
    steps.forEach(function (s) { mx = Math.max(mx, s.time || 0, s.predicted || 0); });
    steps.forEach(function (s, k) {
      var y = 10 + k * bh;
      svg.appendChild(sv("text", { x: left - 4, y: y + 9, "text-anchor": "end" }, ("#" + s.i + " " + s.name).slice(0, 44)));
      var bw = mx ? (s.time || 0) / mx * (w - left - 90) : 0;
      var r = sv("rect", { x: left, y: y + 1, width: Math.max(bw, 0.5), height: bh - 2, fill: haveMeasured ? "#1565c0" : "#90a4ae" });
      r.appendChild(sv("title", {}, s.name + ": " + fmtUs(s.time)));
      svg.appendChild(r);
      if (haveMeasured && s.predicted && mx)
        svg.appendChild(sv("line", { x1: left + s.predicted / mx * (w - left - 90), x2: left + s.predicted / mx * (w - left - 90), y1: y, y2: y + bh, stroke: "#d84315", "stroke-width": 2 }));
      svg.appendChild(sv("text", { x: left + bw + 4, y: y + 9 }, fmtUs(s.time)));
    });
    svg.appendChild(sv("text", { x: left, y: h - 6 }, haveMeasured ? "bars: measured median; red ticks: predicted" : "bars: predicted by the IO model (no profile)"));
    $("bars").appendChild(svg);
    drawn.bars = n;
  }

  function drawRoofline() {
    var div = $("roofline");
    if (!machine || !Array.isArray(machine.levels)) { div.appendChild(el("p", { "class": "missing" }, "no machine description in the data")); drawn.roofline = 0; return; }
    var thr = (prof && prof.threads) || (steps[0] && steps[0].src.io && steps[0].src.io.threads) || 1;
    var pi = thr > 1 ? 1 : 0;
    var peak = Array.isArray(machine.fp32_gflops) ? num(machine.fp32_gflops[pi]) || num(machine.fp32_gflops[0]) : null;
    var pts = steps.map(function (s) {
      var g = null;
      if (s.prof && num(s.prof.gflops) !== null) g = s.prof.gflops;
      else if (s.time) g = s.flops / (s.time * 1e3);
      return { s: s, x: s.intensity, y: g };
    }).filter(function (p) { return p.x > 0 && p.y > 0; });
    var xr = range(pts.map(function (p) { return p.x; }).concat([0.05, 200]));
    var yr = range(pts.map(function (p) { return p.y; }).concat(peak ? [peak * 2] : []));
    var svg = chart(720, 420), box = { x: 60, y: 10, w: 560, h: 370 };
    var ax = logAxes(svg, box, xr, yr, "arithmetic intensity (FLOP/byte)", "GFLOP/s");
    var roofs = 0;
    machine.levels.forEach(function (lv, k) {
      var bw = Array.isArray(lv.read_gbs) ? num(lv.read_gbs[pi]) || num(lv.read_gbs[0]) : null;
      if (!bw) return;
      var pts2 = [], steps2 = 40;
      for (var q = 0; q <= steps2; q++) {
        var x = Math.pow(10, Math.log10(xr[0]) + q / steps2 * (Math.log10(xr[1]) - Math.log10(xr[0])));
        var y = Math.min(bw * x, peak || Infinity);
        if (y < yr[0]) continue;
        pts2.push(ax.X(x).toFixed(1) + "," + ax.Y(Math.min(y, yr[1])).toFixed(1));
      }
      var c = levelColor(lv.name);
      svg.appendChild(sv("polyline", { points: pts2.join(" "), fill: "none", stroke: c, "stroke-width": 1.5 }));
      svg.appendChild(sv("text", { x: box.x + box.w + 4, y: 20 + k * 14, fill: c }, String(lv.name) + " " + bw.toFixed(0) + " GB/s"));
      roofs++;
    });
    if (peak) svg.appendChild(sv("text", { x: box.x + box.w + 4, y: 20 + machine.levels.length * 14, fill: "#000" }, "peak " + peak.toFixed(0) + " GFLOP/s"));
    pts.forEach(function (p) {
      var c = sv("circle", { cx: ax.X(p.x), cy: ax.Y(p.y), r: 3.5, fill: levelColor(p.s.bound === "compute" ? "REG" : p.s.bound), "fill-opacity": 0.75, "class": "pt" });
      c.appendChild(sv("title", {}, p.s.name + ": " + p.y.toPrecision(3) + " GFLOP/s at " + p.x.toPrecision(3) + " FLOP/B, " + boundText(p.s.bound)));
      c.addEventListener("click", function () { showDetails(p.s); });
      svg.appendChild(c);
    });
    svg.appendChild(sv("text", { x: box.x + 6, y: box.y + 12 }, (haveMeasured ? "points: achieved" : "points: predicted") + " GFLOP/s on " + thr + " thread(s); colour: bound"));
    div.appendChild(svg);
    drawn.roofline = pts.length;
    drawn.roofs = roofs;
  }

  function lineChart(div, series, xl, yl, xs) {
    var svg = chart(900, 260), box = { x: 70, y: 10, w: 700, h: 210 }, mx = 0, n = 0;
    series.forEach(function (s) { s.v.forEach(function (v) { mx = Math.max(mx, v || 0); }); n = Math.max(n, s.v.length); });
    if (!mx) mx = 1;
    var X = function (k) { return box.x + (n > 1 ? k / (n - 1) : 0.5) * box.w; }, Y = function (v) { return box.y + box.h - v / mx * box.h; };
    svg.appendChild(sv("rect", { x: box.x, y: box.y, width: box.w, height: box.h, fill: "none", stroke: "#888" }));
    for (var t = 0; t <= 4; t++) svg.appendChild(sv("text", { x: box.x - 4, y: Y(mx * t / 4) + 3, "text-anchor": "end" }, fmt(mx * t / 4, series[0].unit || "")));
    if (xs) xs.forEach(function (x, k) { svg.appendChild(sv("text", { x: X(k), y: box.y + box.h + 12, "text-anchor": "middle" }, String(x))); });
    series.forEach(function (s, si) {
      svg.appendChild(sv("polyline", { points: s.v.map(function (v, k) { return X(k).toFixed(1) + "," + Y(v || 0).toFixed(1); }).join(" "), fill: "none", stroke: s.color, "stroke-width": 1.5 }));
      svg.appendChild(sv("text", { x: box.x + box.w + 6, y: box.y + 12 + si * 14, fill: s.color }, s.label));
    });
    svg.appendChild(sv("text", { x: box.x + box.w / 2, y: box.y + box.h + 28, "text-anchor": "middle" }, xl));
    div.appendChild(svg);
  }

  function drawMemory() {
    var div = $("memory"), tl = prof && prof.memory && Array.isArray(prof.memory.timeline) ? prof.memory.timeline : null;
    var v = tl ? tl.map(function (t) { return num(t.arena_live_bytes) || 0; }) : steps.map(function (s) { return s.arena; });
    if (!v.length || !v.some(function (x) { return x !== null; })) {
      div.appendChild(el("p", { "class": "missing" }, "no arena timeline: it comes from a profile (kiln profile --report); arena " + fmt(num(insp.arena_bytes), "B") + ", lower bound " + fmt(num(insp.lower_bound_bytes), "B")));
      drawn.memory = 0;
      return;
    }
    lineChart(div, [{ v: v, color: "#6a1b9a", label: "arena bytes live", unit: "B" }], "step", "bytes");
    drawn.memory = v.length;
  }

  function drawPredicted() {
    var div = $("predicted");
    var pts = steps.filter(function (s) { return s.measured > 0 && s.predicted > 0; });
    if (!pts.length) { div.appendChild(el("p", { "class": "missing" }, "no measured times: run kiln profile --report (or kiln bench --per-step beside an engine)")); drawn.predicted = 0; return; }
    var r = range(pts.map(function (s) { return s.measured; }).concat(pts.map(function (s) { return s.predicted; })));
    var svg = chart(520, 440), box = { x: 60, y: 10, w: 440, h: 390 };
    var ax = logAxes(svg, box, r, r, "predicted (us)", "measured (us)");
    svg.appendChild(sv("line", { x1: ax.X(r[0]), y1: ax.Y(r[0]), x2: ax.X(r[1]), y2: ax.Y(r[1]), stroke: "#888", "stroke-dasharray": "4 3" }));
    pts.forEach(function (s) {
      var c = sv("circle", { cx: ax.X(s.predicted), cy: ax.Y(s.measured), r: 3.5, fill: "#1565c0", "fill-opacity": 0.7, "class": "pt" });
      c.appendChild(sv("title", {}, s.name + ": predicted " + fmtUs(s.predicted) + ", measured " + fmtUs(s.measured)));
      c.addEventListener("click", function () { showDetails(s); });
      svg.appendChild(c);
    });
    div.appendChild(svg);
    drawn.predicted = pts.length;
  }

  function drawSweep() {
    var div = $("sweep"), sw = prof && prof.sweep;
    if (!sw || !Array.isArray(sw.sizes) || !sw.sizes.length) { $("sec-sweep").hidden = true; drawn.sweep = 0; return; }
    var xs = sw.sizes.map(function (z) { return sw.name + "=" + z.value; });
    function ser(kind, key) { return sw.sizes.map(function (z) { return z[kind] ? num(z[kind][key]) || 0 : 0; }); }
    lineChart(div, [{ v: ser("optimized", "arena_bytes"), color: "#2e7d32", label: "arena, optimized", unit: "B" },
                    { v: ser("unoptimized", "arena_bytes"), color: "#a5d6a7", label: "arena, unoptimized" },
                    { v: ser("optimized", "peak_rss_bytes"), color: "#c62828", label: "peak RSS, optimized" },
                    { v: ser("unoptimized", "peak_rss_bytes"), color: "#ef9a9a", label: "peak RSS, unoptimized" }], "size", "bytes", xs);
    lineChart(div, [{ v: ser("optimized", "p50_ms"), color: "#1565c0", label: "p50 ms, optimized", unit: "" },
                    { v: ser("unoptimized", "p50_ms"), color: "#90caf9", label: "p50 ms, unoptimized" }], "size", "ms", xs);
    drawn.sweep = sw.sizes.length;
  }

  /* ---- neural circuit diagrams (Abbott and Zardini style) ----
   * One column per memory level (DRAM left, registers right); each tensor a
   * horizontal wire in its level's colour labelled with its axes and size;
   * every level change an arrow between columns labelled bytes x repetitions;
   * ops as boxes at the compute end. */
  function circuit(diag, variant) {
    var part = diag[variant] || {}, tr = Array.isArray(part.transfers) ? part.transfers : [];
    var tensors = Array.isArray(diag.tensors) ? diag.tensors : [];
    var ops = Array.isArray(diag.ops) ? diag.ops : [];
    var levels = ["DRAM", "L3", "L2", "L1", "registers"];
    tr.forEach(function (t) { [t.from, t.to].forEach(function (l) { if (l && levels.indexOf(String(l)) < 0) levels.push(String(l)); }); });
    var colW = 120, rowH = 34, top = 36, rows = Math.max(tr.length, 1);
    var w = levels.length * colW + 20, h = top + rows * rowH + 40 + ops.length * 0;
    var svg = sv("svg", { "class": "chart circuit", width: w, height: h + 60, viewBox: "0 0 " + w + " " + (h + 60) });
    levels.forEach(function (l, k) {
      var x = 10 + k * colW;
      svg.appendChild(sv("rect", { x: x, y: 20, width: colW - 8, height: h - 20, fill: levelColor(l), "fill-opacity": 0.07, stroke: levelColor(l), "stroke-opacity": 0.4 }));
      svg.appendChild(sv("text", { x: x + colW / 2 - 4, y: 14, "text-anchor": "middle", fill: levelColor(l), "font-weight": 600 }, l));
    });
    function cx(l) { var k = levels.indexOf(String(l)); return 10 + (k < 0 ? 0 : k) * colW + colW / 2 - 4; }
    tr.forEach(function (t, k) {
      var y = top + k * rowH + 10, x1 = cx(t.from), x2 = cx(t.to);
      var tn = tensors.filter(function (z) { return z.name === t.tensor; })[0];
      var c = levelColor(String(t.to));
      svg.appendChild(sv("line", { x1: x1, y1: y, x2: x2, y2: y, stroke: c, "stroke-width": 2.5, "marker-end": "url(#arrow)" }));
      svg.appendChild(sv("circle", { cx: x1, cy: y, r: 3, fill: levelColor(String(t.from)) }));
      var lab = String(t.tensor) + (tn && Array.isArray(tn.axes) ? " [" + tn.axes.join(",") + "]" : "");
      svg.appendChild(sv("text", { x: Math.min(x1, x2) + 4, y: y - 4 }, lab));
      svg.appendChild(sv("text", { x: Math.min(x1, x2) + 4, y: y + 12, fill: "#444" },
        fmt(num(t.bytes), "B") + " \u00d7 " + (t.repetitions !== undefined ? t.repetitions : 1) + (t.tile && typeof t.tile === "object" ? "  tile " + Object.keys(t.tile).map(function (k) { return k + "=" + t.tile[k]; }).join(",") : "")));
    });
    if (!tr.length) svg.appendChild(sv("text", { x: 14, y: top + 14, "class": "missing" }, "no level changes recorded"));
    var ox = 10;
    ops.forEach(function (o) {
      var name = typeof o === "string" ? o : String(o.op || o.name || "op");
      var bw = Math.max(50, name.length * 6.5 + 10);
      svg.appendChild(sv("rect", { x: ox, y: h + 8, width: bw, height: 22, fill: "#fff", stroke: "#222", rx: 3 }));
      svg.appendChild(sv("text", { x: ox + 5, y: h + 23 }, name));
      ox += bw + 8;
    });
    svg.appendChild(sv("text", { x: 10, y: h + 50, "font-weight": 600 }, variant + ": " + (part.bytes && typeof part.bytes === "object" ? Object.keys(part.bytes).map(function (k) { return k + " " + fmt(num(part.bytes[k]), "B"); }).join(", ") : fmt(num(part.bytes), "B")) + " moved"));
    return svg;
  }
  function drawDiagrams() {
    var div = $("diagrams"), count = 0;
    var defs = sv("svg", { width: 0, height: 0, style: "position:absolute" });
    var mk = sv("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" });
    mk.appendChild(sv("path", { d: "M0,0 L10,5 L0,10 z", fill: "#333" }));
    var d0 = sv("defs"); d0.appendChild(mk); defs.appendChild(d0); div.appendChild(defs);
    steps.forEach(function (s) {
      var dg = s.src.diagram;
      if (!dg || typeof dg !== "object") return;
      var box = el("div", { "class": "diagram-step", "data-step": s.i });
      box.appendChild(el("h3", {}, "#" + s.i + " " + s.name + " (" + s.op + ")" +
        (dg.fusion_saves_bytes && typeof dg.fusion_saves_bytes === "object" ? ": fusion saves " + Object.keys(dg.fusion_saves_bytes).map(function (k) { return k + " " + fmt(num(dg.fusion_saves_bytes[k]), "B"); }).join(", ") : "")));
      var axes = dg.axes && typeof dg.axes === "object" ? Object.keys(dg.axes).map(function (k) { return k + "=" + dg.axes[k]; }).join("  ") : "";
      if (axes) box.appendChild(el("div", {}, "axes: " + axes));
      var row = el("div", { "class": "diagram" });
      ["unfused", "fused"].forEach(function (v) { var c = el("div"); c.appendChild(el("h3", {}, v)); c.appendChild(circuit(dg, v)); row.appendChild(c); });
      box.appendChild(row);
      div.appendChild(box);
      count++;
    });
    if (!count) div.appendChild(el("p", { "class": "missing" }, "no fused step with a diagram in this engine"));
    drawn.diagrams = count;
  }

  [drawGraph, drawBottlenecks, drawBars, drawRoofline, drawMemory, drawPredicted, drawSweep, drawDiagrams].forEach(function (f) {
    try { f(); } catch (e) { errors.push(f.name + ": " + (e && e.stack ? e.stack : e)); }
  });
  if (steps.length) showDetails(steps.slice().sort(function (a, b) { return (b.time || 0) - (a.time || 0); })[0]);
  drawn.steps = steps.length;
  drawn.profile = !!prof;
  drawn.errors = errors;
  $("kiln-summary").textContent = JSON.stringify(drawn);
  document.body.dataset.rendered = errors.length ? "error" : "ok";
})();

/* kiln serve's live dashboard: polls GET /metrics (Prometheus text format
 * 0.0.4) every second, and draws per model, on canvas, the throughput,
 * the latency percentiles of the last interval (from the deltas of the
 * histograms' buckets, interpolated as Prometheus' histogram_quantile
 * does), the batch size distribution, the queue depth, the instances'
 * utilisation and the request outcomes.  No library, nothing fetched but
 * /metrics; every text from the server goes through textContent.
 * The pure functions (parser, quantile) are exported under node for tests. */
"use strict";
(function () {
  /* ---- Prometheus text format ------------------------------------------ */
  function parseValue(s) {
    if (s === "+Inf" || s === "Inf") return Infinity;
    if (s === "-Inf") return -Infinity;
    if (s === "NaN") return NaN;
    var v = Number(s);
    return s.length && !isNaN(v) ? v : undefined;
  }

  /* [{name, labels, value}] of every sample line; lines that do not parse
   * are counted in .bad and skipped. */
  function parseProm(text) {
    var out = [];
    out.bad = 0;
    var lines = String(text).split("\n");
    for (var li = 0; li < lines.length; li++) {
      var line = lines[li].replace(/\r$/, "");
      if (!line.trim() || line.charAt(0) === "#") continue;
      var m = /^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
      if (!m) { out.bad++; continue; }
      var i = m[0].length, labels = {}, ok = true;
      if (line.charAt(i) === "{") {
        i++;
        for (;;) {
          while (line.charAt(i) === " " || line.charAt(i) === ",") i++;
          if (line.charAt(i) === "}") { i++; break; }
          var lm = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(i));
          if (!lm) { ok = false; break; }
          i += lm[0].length;
          var v = "", closed = false;
          while (i < line.length) {
            var c = line.charAt(i++);
            if (c === "\\") {
              var e = line.charAt(i++);
              v += e === "n" ? "\n" : e;
            } else if (c === '"') { closed = true; break; } else v += c;
          }
          if (!closed) { ok = false; break; }
          labels[lm[1]] = v;
        }
      }
      var rest = ok ? line.slice(i).trim().split(/\s+/) : [];
      var val = rest.length ? parseValue(rest[0]) : undefined;
      if (!ok || val === undefined) { out.bad++; continue; }
      out.push({ name: m[1], labels: labels, value: val });
    }
    return out;
  }

  /* Prometheus' histogram_quantile on [{le, count}] (cumulative counts,
   * any order): linear interpolation inside the bucket holding the rank,
   * the lowest bucket starting at 0, the +Inf bucket answered with the
   * highest finite bound; NaN without observations or without +Inf. */
  function histogramQuantile(q, buckets) {
    if (isNaN(q)) return NaN;
    if (q < 0) return -Infinity;
    if (q > 1) return Infinity;
    var b = buckets.slice().sort(function (x, y) { return x.le - y.le; });
    if (b.length < 2 || b[b.length - 1].le !== Infinity) return NaN;
    for (var k = 1; k < b.length; k++) /* as Prometheus: force monotonic */
      if (b[k].count < b[k - 1].count) b[k] = { le: b[k].le, count: b[k - 1].count };
    var total = b[b.length - 1].count;
    if (!(total > 0)) return NaN;
    var rank = q * total, i = 0;
    while (i < b.length - 1 && b[i].count < rank) i++;
    if (i === b.length - 1) return b[b.length - 2].le;
    if (i === 0 && b[0].le <= 0) return b[0].le;
    var start = 0, prev = 0;
    if (i > 0) { start = b[i - 1].le; prev = b[i - 1].count; }
    var n = b[i].count - prev;
    if (!(n > 0)) return b[i].le;
    return start + (b[i].le - start) * ((rank - prev) / n);
  }

  /* ---- snapshots: what one scrape says, per model -------------------- */
  var HISTS = {
    kiln_request_duration_seconds: "request", kiln_queue_duration_seconds: "queue",
    kiln_compute_duration_seconds: "compute", kiln_batch_size: "batch"
  };
  function emptyModel() {
    var h = {};
    for (var k in HISTS) h[HISTS[k]] = { buckets: {}, sum: 0, count: 0 };
    return { outcomes: {}, reqVersion: {}, infVersion: {}, inf: 0, batches: 0, hist: h,
             depth: null, busy: {}, ready: {}, loads: {} };
  }
  function snapshot(samples, t) {
    var s = { t: t, models: {}, memory: {}, names: {} };
    function model(name) {
      if (name === undefined) return null;
      return s.models[name] || (s.models[name] = emptyModel());
    }
    function add(o, k, v) { o[k] = (o[k] || 0) + v; }
    samples.forEach(function (x) {
      s.names[x.name] = true;
      var L = x.labels, m;
      if (x.name === "kiln_memory_bytes") { s.memory[L.kind || "?"] = x.value; return; }
      if (!(m = model(L.model))) return;
      var ver = L.version === undefined ? "" : L.version;
      switch (x.name) {
      case "kiln_requests_total":
        add(m.outcomes, L.outcome || "?", x.value); add(m.reqVersion, ver, x.value); return;
      case "kiln_inferences_total": m.inf += x.value; add(m.infVersion, ver, x.value); return;
      case "kiln_batches_total": m.batches += x.value; return;
      case "kiln_queue_depth": m.depth = (m.depth || 0) + x.value; return;
      case "kiln_instance_busy_seconds_total": add(m.busy, ver + "/" + (L.instance || "?"), x.value); return;
      case "kiln_model_ready": m.ready[ver] = x.value; return;
      case "kiln_model_loads_total": add(m.loads, ver + " " + (L.outcome || "?"), x.value); return;
      }
      var base = x.name.replace(/_(bucket|sum|count)$/, ""), h = HISTS[base];
      if (!h) return;
      var H = m.hist[h];
      if (/_bucket$/.test(x.name)) {
        var le = parseValue(L.le || "");
        if (le !== undefined && !isNaN(le)) add(H.buckets, String(le), x.value);
      } else if (/_sum$/.test(x.name)) H.sum += x.value;
      else H.count += x.value;
    });
    return s;
  }

  /* counter increase from a to b; a reset (b < a) counts b from zero, as
   * Prometheus' increase() does */
  function inc(a, b) { a = a || 0; b = b || 0; return b >= a ? b - a : b; }
  function incMap(a, b) {
    var o = {};
    for (var k in b) o[k] = inc(a ? a[k] : 0, b[k]);
    return o;
  }
  function histDelta(a, b) {
    var reset = a && b.count < a.count;
    var bk = [];
    for (var k in b.buckets)
      bk.push({ le: Number(k), count: reset || !a ? b.buckets[k] : inc(a.buckets[k], b.buckets[k]) });
    return { buckets: bk, sum: reset || !a ? b.sum : b.sum - a.sum,
             count: reset || !a ? b.count : b.count - a.count };
  }
  function sumOf(o) { var s = 0; for (var k in o) s += o[k]; return s; }

  /* One point per model from two snapshots: rates per second, latency
   * percentiles in ms (NaN when the interval saw no request). */
  function point(a, b, name) {
    var ma = a.models[name], mb = b.models[name], dt = (b.t - a.t) / 1000;
    if (!mb || !(dt > 0)) return null;
    var p = { t: b.t };
    var outc = incMap(ma && ma.outcomes, mb.outcomes);
    p.outcomes = {};
    for (var k in outc) p.outcomes[k] = outc[k] / dt;
    p.reqRate = sumOf(outc) / dt;
    p.infRate = inc(ma && ma.inf, mb.inf) / dt;
    var vers = incMap(ma && ma.infVersion, mb.infVersion);
    p.versions = {};
    for (var v in vers) p.versions[v] = vers[v] / dt;
    ["request", "queue", "compute"].forEach(function (h) {
      var d = histDelta(ma && ma.hist[h], mb.hist[h]);
      p[h] = {};
      [0.5, 0.9, 0.99].forEach(function (q) { p[h][q] = histogramQuantile(q, d.buckets) * 1000; });
    });
    var db = histDelta(ma && ma.hist.batch, mb.hist.batch);
    p.meanBatch = db.count > 0 ? db.sum / db.count : NaN;
    p.depth = mb.depth === null ? NaN : mb.depth;
    var busy = incMap(ma && ma.busy, mb.busy);
    p.util = {};
    for (var i in busy) p.util[i] = Math.min(1, busy[i] / dt) * 100;
    return p;
  }

  /* Non-cumulative counts per bucket of a cumulative histogram. */
  function bucketCounts(h) {
    var b = h.buckets.slice().sort(function (x, y) { return x.le - y.le; });
    var prev = 0;
    return b.map(function (x) {
      var c = Math.max(0, x.count - prev);
      prev = Math.max(prev, x.count);
      return { le: x.le, count: c };
    });
  }

  var api = { parseProm: parseProm, histogramQuantile: histogramQuantile, snapshot: snapshot,
              point: point, bucketCounts: bucketCounts, histDelta: histDelta };
  if (typeof module !== "undefined" && module.exports) { module.exports = api; return; }
  if (typeof document === "undefined") return;

  /* ---- the page ------------------------------------------------------ */
  var errors = [];
  window.onerror = function (msg, src, line) { errors.push(String(msg) + " @" + line); };
  var params = new URLSearchParams(location.search);
  var INTERVAL = Math.max(200, Number(params.get("interval")) || 1000); /* ms between polls */
  var WINDOW = Math.max(10, Number(params.get("window")) || 120) * 1000; /* ms plotted */
  var METRICS = params.get("metrics") || "/metrics";
  var COLORS = ["#1565c0", "#ef6c00", "#c62828", "#2e7d32", "#6a1b9a", "#00838f", "#8d6e63", "#546e7a"];
  var OUTCOME_COLORS = { success: "#2e7d32", invalid: "#ef6c00", rejected: "#c62828",
                         timeout: "#6a1b9a", error: "#212121" };
  var snaps = [], history = {}, views = {}, first = null;
  var polls = { ok: 0, failed: 0, frames: 0, changed: 0 }; /* changed: scrapes whose counters moved */
  var lastTotal = null;

  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmt(v, digits) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    var a = Math.abs(v), pre = ["", "k", "M", "G", "T"], i = 0;
    while (a >= 10000 && i < pre.length - 1) { a /= 1000; v /= 1000; i++; }
    if (a !== 0 && a < 0.01) return v.toExponential(1);
    return (a >= 100 ? v.toFixed(0) : v.toFixed(digits === undefined ? 2 : digits)
            .replace(/\.?0+$/, "")) + pre[i];
  }
  function fmtBytes(v) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return v.toFixed(i ? 1 : 0) + " " + u[i];
  }

  /* a "nice" step of about range/5: 1, 2 or 5 times a power of ten */
  function niceStep(range) {
    if (!(range > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(range / 5))), r = range / 5 / p;
    return p * (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10);
  }
  function setupCanvas(cv) {
    var dpr = window.devicePixelRatio || 1, w = cv.clientWidth || 380, h = cv.clientHeight || 170;
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
      cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
    }
    var g = cv.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = "10px system-ui, sans-serif";
    return { g: g, w: w, h: h };
  }
  function yAxis(g, x0, x1, y0, y1, ymax, unit) {
    var step = niceStep(ymax);
    g.strokeStyle = "#eee"; g.fillStyle = "#666"; g.textAlign = "right"; g.textBaseline = "middle";
    for (var v = 0; v <= ymax * 1.0001; v += step) {
      var y = y0 - (v / ymax) * (y0 - y1);
      g.beginPath(); g.moveTo(x0, y); g.lineTo(x1, y); g.stroke();
      g.fillText(fmt(v) + (unit || ""), x0 - 3, y);
    }
  }

  /* Lines over time: series [{name, color, pts: [[t, v]]}], NaN breaks a
   * line; returns the number of points drawn. */
  function drawLines(cv, series, t1, unit) {
    var c = setupCanvas(cv), g = c.g, L = 46, R = 8, T = 8, B = 16;
    var t0 = t1 - WINDOW, ymax = 0, drawn = 0;
    series.forEach(function (s) {
      s.pts.forEach(function (p) { if (p[0] >= t0 && isFinite(p[1])) ymax = Math.max(ymax, p[1]); });
    });
    ymax = ymax > 0 ? niceStep(ymax * 1.1) * Math.ceil(ymax * 1.1 / niceStep(ymax * 1.1)) : 1;
    yAxis(g, L, c.w - R, c.h - B, T, ymax, unit);
    g.textAlign = "center"; g.textBaseline = "top"; g.fillStyle = "#666";
    for (var s = 0; s <= WINDOW / 1000; s += WINDOW >= 60000 ? 30 : 10) {
      var x = c.w - R - (s * 1000 / WINDOW) * (c.w - R - L);
      g.fillText(s ? "-" + s + "s" : "now", x, c.h - B + 3);
    }
    g.strokeStyle = "#888"; g.beginPath(); g.moveTo(L, T); g.lineTo(L, c.h - B);
    g.lineTo(c.w - R, c.h - B); g.stroke();
    g.save(); g.beginPath(); g.rect(L, T - 2, c.w - R - L, c.h - B - T + 4); g.clip();
    series.forEach(function (sr) {
      g.strokeStyle = sr.color; g.lineWidth = 1.6; g.beginPath();
      var pen = false;
      sr.pts.forEach(function (p) {
        if (p[0] < t0 - INTERVAL * 2 || !isFinite(p[1])) { pen = false; return; }
        var px = L + ((p[0] - t0) / WINDOW) * (c.w - R - L);
        var py = c.h - B - (p[1] / ymax) * (c.h - B - T);
        if (pen) g.lineTo(px, py); else g.moveTo(px, py);
        pen = true; drawn++;
      });
      g.stroke();
    });
    g.restore();
    return drawn;
  }

  /* Bars per bucket: groups [{name, color, values[]}] over labels. */
  function drawBars(cv, labels, groups) {
    var c = setupCanvas(cv), g = c.g, L = 46, R = 8, T = 8, B = 16, drawn = 0;
    var ymax = 0;
    groups.forEach(function (gr) { gr.values.forEach(function (v) { if (isFinite(v)) ymax = Math.max(ymax, v); }); });
    ymax = ymax > 0 ? Math.min(100, Math.ceil(ymax * 1.1 / 10) * 10) : 100;
    yAxis(g, L, c.w - R, c.h - B, T, ymax, "%");
    var n = labels.length, slot = (c.w - R - L) / Math.max(1, n), bw = slot * 0.8 / Math.max(1, groups.length);
    g.textAlign = "center"; g.textBaseline = "top"; g.fillStyle = "#666";
    labels.forEach(function (lab, i) { g.fillText(lab, L + slot * (i + 0.5), c.h - B + 3); });
    groups.forEach(function (gr, j) {
      g.fillStyle = gr.color;
      gr.values.forEach(function (v, i) {
        if (!(v > 0)) return;
        var hgt = (v / ymax) * (c.h - B - T);
        g.fillRect(L + slot * i + slot * 0.1 + bw * j, c.h - B - hgt, bw - 1, hgt);
        drawn++;
      });
    });
    g.strokeStyle = "#888"; g.beginPath(); g.moveTo(L, T); g.lineTo(L, c.h - B);
    g.lineTo(c.w - R, c.h - B); g.stroke();
    return drawn;
  }
  function legend(div, items) {
    div.textContent = "";
    items.forEach(function (it) {
      var s = el("span"), i = el("i");
      i.style.background = it.color;
      s.appendChild(i);
      s.appendChild(document.createTextNode(it.name + (it.value !== undefined ? " " + it.value : "")));
      div.appendChild(s);
    });
  }

  var CHARTS = [
    ["throughput", "Throughput (per second)"], ["latency", "Request latency, last interval (ms)"],
    ["stages", "Queue and compute time (ms)"], ["batch", "Batch sizes (% of batches)"],
    ["depth", "Queue depth (requests waiting)"], ["util", "Instance utilisation (%)"],
    ["outcomes", "Request outcomes (per second)"]
  ];
  function view(name) {
    if (views[name]) return views[name];
    var none = $("no-models");
    if (none) none.remove();
    var sec = el("section", { "class": "model", "data-model": name });
    sec.appendChild(el("h2", null, name));
    var facts = el("div", { "class": "facts" });
    sec.appendChild(facts);
    var grid = el("div", { "class": "charts" }), v = { sec: sec, facts: facts, charts: {} };
    CHARTS.forEach(function (ch) {
      var box = el("div", { "class": "chart", "data-chart": ch[0], "data-points": "0" });
      box.appendChild(el("h3", null, ch[1]));
      var cv = el("canvas"), lg = el("div", { "class": "legend" });
      box.appendChild(cv); box.appendChild(lg);
      grid.appendChild(box);
      v.charts[ch[0]] = { box: box, cv: cv, legend: lg };
    });
    sec.appendChild(grid);
    var names = Object.keys(views).concat([name]).sort(), main = $("models");
    var after = names.indexOf(name) + 1 < names.length ? views[names[names.indexOf(name) + 1]].sec : null;
    main.insertBefore(sec, after);
    return (views[name] = v);
  }

  function series(h, f) {
    return h.map(function (p) { return [p.t, f(p)]; });
  }
  function last(h, f) {
    for (var i = h.length - 1; i >= 0; i--) { var v = f(h[i]); if (isFinite(v)) return v; }
    return NaN;
  }
  function lineChart(ch, list, t1, unit) {
    var n = drawLines(ch.cv, list, t1, unit);
    ch.box.setAttribute("data-points", String(n));
    legend(ch.legend, list.map(function (s) {
      return { name: s.name, color: s.color, value: fmt(last(s.pts.map(function (p) { return { v: p[1] }; }),
                                                              function (p) { return p.v; })) };
    }));
    return n;
  }

  function render(now) {
    var latest = snaps[snaps.length - 1], summary = { samples: polls.ok, failed: polls.failed,
      frames: polls.frames, errors: errors.slice(0, 5), models: {} };
    for (var name in history) {
      var h = history[name], v = view(name), m = latest.models[name], drawn = {};
      if (!m) continue;
      drawn.throughput = lineChart(v.charts.throughput, [
        { name: "infer/s", color: COLORS[0], pts: series(h, function (p) { return p.infRate; }) },
        { name: "requests/s", color: COLORS[1], pts: series(h, function (p) { return p.reqRate; }) }], now);
      drawn.latency = lineChart(v.charts.latency, [0.5, 0.9, 0.99].map(function (q, i) {
        return { name: "p" + Math.round(q * 100), color: COLORS[i], pts: series(h, function (p) { return p.request[q]; }) };
      }), now);
      drawn.stages = lineChart(v.charts.stages, [
        { name: "queue p50", color: COLORS[3], pts: series(h, function (p) { return p.queue[0.5]; }) },
        { name: "queue p99", color: COLORS[4], pts: series(h, function (p) { return p.queue[0.99]; }) },
        { name: "compute p50", color: COLORS[0], pts: series(h, function (p) { return p.compute[0.5]; }) },
        { name: "compute p99", color: COLORS[2], pts: series(h, function (p) { return p.compute[0.99]; }) }], now);
      drawn.depth = lineChart(v.charts.depth, [
        { name: "queue depth", color: COLORS[5], pts: series(h, function (p) { return p.depth; }) }], now);
      var inst = {};
      h.forEach(function (p) { for (var k in p.util) inst[k] = true; });
      drawn.util = lineChart(v.charts.util, Object.keys(inst).sort().map(function (k, i) {
        return { name: "v" + k.replace("/", " #"), color: COLORS[i % COLORS.length],
                 pts: series(h, function (p) { return p.util[k] === undefined ? NaN : p.util[k]; }) };
      }), now);
      var outs = {};
      h.forEach(function (p) { for (var k in p.outcomes) outs[k] = true; });
      drawn.outcomes = lineChart(v.charts.outcomes, Object.keys(outs).sort().map(function (k, i) {
        return { name: k, color: OUTCOME_COLORS[k] || COLORS[i % COLORS.length],
                 pts: series(h, function (p) { return p.outcomes[k] || 0; }) };
      }), now);

      /* batch sizes: the last 10 s and everything since the page opened */
      var old = snaps[0];
      for (var i = snaps.length - 1; i >= 0; i--) if (now - snaps[i].t >= 10000) { old = snaps[i]; break; }
      var recent = bucketCounts(histDelta(old.models[name] && old.models[name].hist.batch, m.hist.batch));
      var total = bucketCounts(histDelta(first.models[name] && first.models[name].hist.batch, m.hist.batch));
      var pct = function (bc) {
        var s = bc.reduce(function (a, x) { return a + x.count; }, 0);
        return bc.map(function (x) { return s > 0 ? x.count / s * 100 : 0; });
      };
      var labels = recent.map(function (x) { return x.le === Infinity ? ">" + fmt(recent.length > 1 ? recent[recent.length - 2].le : 0) : "\u2264" + fmt(x.le); });
      drawn.batch = drawBars(v.charts.batch.cv, labels, [
        { name: "last 10 s", color: COLORS[0], values: pct(recent) },
        { name: "since the page opened", color: "#90caf9", values: pct(total) }]);
      v.charts.batch.box.setAttribute("data-points", String(drawn.batch));
      legend(v.charts.batch.legend, [{ name: "last 10 s", color: COLORS[0] },
                                     { name: "since the page opened", color: "#90caf9" }]);

      var lp = h[h.length - 1] || {};
      var ready = Object.keys(m.ready).filter(function (k) { return m.ready[k] > 0; }).sort();
      var reqs = sumOf(m.outcomes);
      v.facts.textContent = "";
      [["versions ready", ready.join(", ") || "none"], ["requests", fmt(reqs, 0)],
       ["success", fmt(m.outcomes.success || 0, 0)], ["inferences", fmt(m.inf, 0)],
       ["batches", fmt(m.batches, 0)], ["mean batch (last interval)", fmt(lp.meanBatch, 2)],
       ["loads", Object.keys(m.loads).sort().map(function (k) { return "v" + k + " " + m.loads[k]; }).join(", ") || "-"]
      ].forEach(function (f, i) {
        if (i) v.facts.appendChild(document.createTextNode("  \u00b7  "));
        v.facts.appendChild(document.createTextNode(f[0] + ": "));
        v.facts.appendChild(el("b", null, f[1]));
      });
      summary.models[name] = {
        points: h.length, drawn: drawn, versions_ready: ready,
        totals: { requests: reqs, inferences: m.inf, batches: m.batches, outcomes: m.outcomes },
        last: { infer_rate: lp.infRate, request_rate: lp.reqRate, p50_ms: lp.request && lp.request[0.5],
                p90_ms: lp.request && lp.request[0.9], p99_ms: lp.request && lp.request[0.99],
                depth: lp.depth, mean_batch: lp.meanBatch },
        /* the highest over the page's intervals: the last alone may be
         * milliseconds long (a headless browser's virtual time) and see
         * no request end */
        peak: { infer_rate: Math.max.apply(null, h.map(function (p) { return p.infRate || 0; })),
                p99_ms: Math.max.apply(null, h.map(function (p) {
                  return (p.request && p.request[0.99]) || 0; })) }
      };
    }
    var mem = latest.memory, parts = [];
    Object.keys(mem).sort().forEach(function (k) { parts.push(k + " " + fmtBytes(mem[k])); });
    $("server").textContent = (parts.length ? "memory: " + parts.join(", ") + "  \u00b7  " : "") +
      "polled every " + INTERVAL / 1000 + " s, " + polls.ok + " samples";
    polls.frames++;
    summary.frames = polls.frames;
    summary.changed = polls.changed;
    summary.metric_names = Object.keys(latest.names).filter(function (k) { return /^kiln_/.test(k); }).length;
    $("serve-summary").textContent = JSON.stringify(summary);
    document.body.setAttribute("data-samples", String(polls.ok));
    document.body.setAttribute("data-frames", String(polls.frames));
    document.body.setAttribute("data-rendered", errors.length ? "error" : "ok");
  }

  function status(text, cls) {
    var s = $("status");
    s.textContent = text;
    s.className = "status " + cls;
  }
  function poll() {
    var started = Date.now();
    fetch(METRICS, { cache: "no-store" }).then(function (r) {
      if (!r.ok) throw new Error("GET " + METRICS + ": HTTP " + r.status);
      return r.text();
    }).then(function (text) {
      var now = Date.now(), samples = parseProm(text), s = snapshot(samples, now);
      polls.ok++;
      var total = samples.reduce(function (a, x) {
        return /_total$|_count$/.test(x.name) ? a + x.value : a;
      }, 0);
      if (lastTotal !== null && total !== lastTotal) polls.changed++;
      lastTotal = total;
      status(samples.bad ? "live (" + samples.bad + " lines unreadable)" : "live", "ok");
      var prev = snaps[snaps.length - 1];
      if (!first) first = s;
      snaps.push(s);
      while (snaps.length > 2 && now - snaps[1].t > WINDOW + 15000) snaps.shift();
      for (var name in s.models) {
        var h = history[name] || (history[name] = []);
        var p = prev ? point(prev, s, name) : null;
        if (p) h.push(p);
        while (h.length && now - h[0].t > WINDOW + 5000) h.shift();
      }
      try { render(now); } catch (e) { errors.push("render: " + e); document.body.setAttribute("data-rendered", "error"); throw e; }
    }).catch(function (e) {
      polls.failed++;
      status("unreachable: " + e.message, "down");
      document.body.setAttribute("data-failed", String(polls.failed));
    }).then(function () {
      setTimeout(poll, Math.max(0, INTERVAL - (Date.now() - started)));
    });
  }
  window.addEventListener("resize", function () { if (snaps.length) render(snaps[snaps.length - 1].t); });
  poll();
})();

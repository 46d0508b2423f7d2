// Shoal dashboard: polls this node's JSON API every second and draws nodes, ranges, live charts and the
// autopilot's decision log. No libraries, no network access beyond this node's /api/.
//
// Elements carry data attributes for tests and scripts: #nodes rows data-node-id/data-live/data-state/
// data-admin, #ranges rows data-range-id/data-leader/data-replicas/data-learners, #decisions rows
// data-decision-id/data-status, and every chart's <svg> data-points (points drawn).
"use strict";
(() => {
  const TOKEN_KEY = "shoal.authToken";
  const POLL_MS = 1000;
  const WINDOW_MS = 5 * 60 * 1000; // what the charts show
  const RATE_WINDOW_MS = 5000; // latency quantiles and hit ratios are over this much time
  const SVG_NS = "http://www.w3.org/2000/svg";
  const COLORS = { reads: "#0969da", writes: "#bf3989", p50: "#0969da", p99: "#cf222e", hit: "#1a7f37" };

  const $ = (id) => document.getElementById(id);
  const samples = []; // one per successful /api/stats poll, oldest first, WINDOW_MS of them
  let lastDecisions = null;

  // ---------- auth: ?token=T (or #token=T) is kept in sessionStorage and sent as a Bearer header ----------

  function takeTokenFromURL() {
    const u = new URL(location.href);
    let tok = u.searchParams.get("token");
    if (tok !== null) u.searchParams.delete("token");
    const hash = new URLSearchParams(u.hash.slice(1));
    if (hash.has("token")) {
      tok = hash.get("token");
      hash.delete("token");
      u.hash = hash.toString();
    }
    if (tok === null) return;
    if (tok) sessionStorage.setItem(TOKEN_KEY, tok);
    // Out of the address bar and the history, so it is not shared along with the URL.
    history.replaceState(null, "", u.pathname + u.search + u.hash);
  }

  async function get(path) {
    const headers = { Accept: "application/json" };
    const tok = sessionStorage.getItem(TOKEN_KEY);
    if (tok) headers.Authorization = "Bearer " + tok;
    let resp;
    try {
      resp = await fetch(path, { headers, cache: "no-store" });
    } catch (e) {
      throw new Error(path + ": node unreachable (" + (e.message || e) + ")");
    }
    let body = null;
    try {
      body = await resp.json();
    } catch (e) {
      body = null;
    }
    if (resp.status === 401) {
      $("auth").hidden = false;
      throw new Error(path + ": " + ((body && body.error) || "unauthorized") + " — enter the token above or open this page with ?token=…");
    }
    if (!resp.ok) throw new Error(path + ": " + ((body && body.error) || resp.status + " " + resp.statusText));
    if (body === null) throw new Error(path + ": answer is not JSON");
    return body;
  }

  // ---------- formatting ----------

  // key shows a hex-encoded key as text when it is printable, else as hex.
  function key(hex, emptyText) {
    if (!hex) return emptyText;
    let s = "";
    for (let i = 0; i < hex.length; i += 2) {
      const c = parseInt(hex.substr(i, 2), 16);
      if (c < 0x20 || c > 0x7e) return "0x" + hex;
      s += String.fromCharCode(c);
    }
    return s;
  }

  function num(v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    if (a >= 100 || Number.isInteger(v)) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    return v.toFixed(2);
  }

  function bytes(v) {
    if (!v) return "0 B";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i === 0 ? v.toFixed(0) : v.toFixed(v >= 100 ? 0 : 1)) + " " + units[i];
  }

  function ms(secs) {
    if (secs === null || secs === undefined) return "–";
    if (secs === 0) return "0";
    const m = secs * 1000;
    if (m >= 1000) return (m / 1000).toFixed(2) + " s";
    if (m >= 10) return m.toFixed(0) + " ms";
    if (m >= 1) return m.toFixed(1) + " ms";
    return m.toFixed(2) + " ms";
  }

  function pct(r) {
    return r === null || r === undefined ? "–" : (r * 100).toFixed(r >= 0.995 && r < 1 ? 1 : 0) + "%";
  }

  function clock(t) {
    return new Date(t).toLocaleTimeString([], { hour12: false });
  }

  function ago(ms) {
    if (!ms) return "never";
    const s = (Date.now() - ms) / 1000;
    if (s < 1) return "just now";
    if (s < 120) return s.toFixed(0) + " s ago";
    return (s / 60).toFixed(0) + " min ago";
  }

  // ---------- tables ----------

  function cell(row, text, cls, col) {
    const td = row.insertCell();
    td.textContent = text;
    if (cls) td.className = cls;
    if (col) td.dataset.col = col;
    return td;
  }

  function fill(id, items, render, emptyText) {
    const body = document.querySelector("#" + id + " tbody");
    body.replaceChildren();
    if (items.length === 0) {
      const td = body.insertRow().insertCell();
      td.colSpan = document.querySelectorAll("#" + id + " thead th").length;
      td.className = "muted";
      td.textContent = emptyText || "none";
    }
    for (const it of items) render(body.insertRow(), it);
  }

  function pill(row, text, cls, col) {
    const td = cell(row, "", "", col);
    const s = document.createElement("span");
    s.className = "pill " + (cls || "");
    s.textContent = text;
    td.appendChild(s);
    return td;
  }

  function liveness(n) {
    if (n.live) return "live";
    if (n.state === "suspect" || n.state === "dead") return n.state;
    return "down";
  }

  function adminState(n) {
    if (n.state === "decommissioning" || n.state === "decommissioned") return n.state;
    if (n.draining) return "draining";
    return "active";
  }

  function renderNodes(nodes, stats) {
    const byID = new Map((stats ? stats.nodes : []).map((s) => [s.id, s]));
    fill("nodes", nodes, (r, n) => {
      const s = byID.get(n.id);
      const live = liveness(n), admin = adminState(n);
      r.dataset.nodeId = n.id;
      r.dataset.live = String(!!n.live);
      r.dataset.state = n.state;
      r.dataset.admin = admin;
      cell(r, n.id, "num", "id");
      const addr = cell(r, n.addr, "", "addr");
      if (n.http_addr) {
        const a = document.createElement("a");
        a.href = location.protocol + "//" + n.http_addr + "/";
        a.textContent = "http " + n.http_addr;
        a.className = "detail";
        addr.append(document.createElement("br"), a);
      }
      pill(r, live, live === "live" ? "ok" : "bad", "liveness");
      pill(r, admin, admin === "active" ? "muted" : "warn", "admin");
      cell(r, n.range_count, "num", "ranges");
      cell(r, n.leader_count, "num", "leaders");
      cell(r, s ? num(s.read_qps + s.write_qps) : "–", "num", "qps");
      const hr = nodeHitRatio(n.id, s);
      cell(r, pct(hr), "num", "hit");
      cell(r, s ? bytes(s.disk_bytes) : "–", "num", "disk");
      cell(r, s ? s.l0_files : "–", "num", "l0");
      cell(r, s ? ago(s.heartbeat_ms) : "–", "muted", "heartbeat");
    }, "no nodes");
  }

  function renderRanges(ranges, stats) {
    const byID = new Map((stats ? stats.ranges : []).map((s) => [s.id, s]));
    fill("ranges", ranges, (r, g) => {
      const s = byID.get(g.id);
      r.dataset.rangeId = g.id;
      r.dataset.leader = g.leader;
      r.dataset.replicas = g.replicas.join(",");
      r.dataset.learners = g.learners.join(",");
      cell(r, g.id, "num", "id");
      const meta = g.id === 1; // the meta range: its span is not part of the user key space
      cell(r, meta ? "(meta range)" : "[" + key(g.start, "−∞") + ", " + key(g.end, "+∞") + ")", meta ? "key muted" : "key", "span");
      cell(r, g.replicas.join(", "), "", "replicas");
      cell(r, g.learners.join(", ") || "–", g.learners.length ? "" : "muted", "learners");
      cell(r, g.leader ? String(g.leader) : "none", g.leader ? "" : "bad", "leader");
      cell(r, s ? num(s.read_qps) + " / " + num(s.write_qps) : "–", "num", "qps");
      cell(r, s && s.leader ? bytes(s.bytes) : "–", "num", "size");
      cell(r, g.generation, "num", "generation");
    }, "no ranges");
  }

  // ---------- samples: counters to rates, histograms to quantiles ----------

  function addSample(stats) {
    const t = Date.now();
    const smp = { t, reads: 0, writes: 0, hits: 0, misses: 0, nodes: new Map() };
    for (const n of stats.nodes) {
      smp.reads += n.read_qps;
      smp.writes += n.write_qps;
      smp.hits += n.block_cache_hits;
      smp.misses += n.block_cache_misses;
      smp.nodes.set(n.id, { hits: n.block_cache_hits, misses: n.block_cache_misses, req: n.requests });
    }
    const base = baseSample(t);
    smp.p50 = smp.p99 = smp.hit = null;
    if (base) {
      const d = deltas(base, smp);
      smp.hit = d.accesses > 0 ? d.hits / d.accesses : null;
      if (d.count > 0) {
        smp.p50 = quantile(0.5, d.bounds, d.buckets, d.count);
        smp.p99 = quantile(0.99, d.bounds, d.buckets, d.count);
      }
      smp.rps = d.count / ((t - base.t) / 1000);
    }
    samples.push(smp);
    while (samples.length > 0 && samples[0].t < t - WINDOW_MS - RATE_WINDOW_MS) samples.shift();
  }

  // baseSample is the newest sample at least RATE_WINDOW_MS older than t (or else the oldest one, if it
  // is at least a poll older).
  function baseSample(t) {
    for (let i = samples.length - 1; i >= 0; i--) {
      if (samples[i].t <= t - RATE_WINDOW_MS) return samples[i];
    }
    if (samples.length > 0 && samples[0].t <= t - POLL_MS * 0.8) return samples[0];
    return null;
  }

  // deltas sums, over the nodes in both samples, what their counters grew by (a node whose counters
  // went down restarted: it is left out).
  function deltas(a, b) {
    const d = { hits: 0, accesses: 0, count: 0, bounds: null, buckets: null };
    for (const [id, nb] of b.nodes) {
      const na = a.nodes.get(id);
      if (!na) continue;
      const dh = nb.hits - na.hits, dm = nb.misses - na.misses;
      if (dh >= 0 && dm >= 0) {
        d.hits += dh;
        d.accesses += dh + dm;
      }
      const ra = na.req, rb = nb.req;
      if (!ra || !rb || rb.count < ra.count || rb.bounds.length !== ra.bounds.length) continue;
      if (!d.bounds) {
        d.bounds = rb.bounds;
        d.buckets = new Array(rb.bounds.length).fill(0);
      }
      if (d.bounds.length !== rb.bounds.length) continue;
      for (let i = 0; i < rb.buckets.length; i++) d.buckets[i] += rb.buckets[i] - ra.buckets[i];
      d.count += rb.count - ra.count;
    }
    return d;
  }

  // quantile interpolates linearly inside the bucket holding rank q·count (as Prometheus'
  // histogram_quantile does); above the last finite bound it answers that bound.
  function quantile(q, bounds, cum, count) {
    const rank = q * count;
    let lo = 0, below = 0;
    for (let i = 0; i < bounds.length; i++) {
      if (cum[i] >= rank) {
        const inside = cum[i] - below;
        return lo + (bounds[i] - lo) * (inside > 0 ? (rank - below) / inside : 1);
      }
      lo = bounds[i];
      below = cum[i];
    }
    return bounds.length ? bounds[bounds.length - 1] : null;
  }

  function nodeHitRatio(id, s) {
    if (!s) return null;
    const last = samples[samples.length - 1];
    const base = last && baseSample(last.t);
    const a = base && base.nodes.get(id), b = last && last.nodes.get(id);
    if (a && b) {
      const dh = b.hits - a.hits, dm = b.misses - a.misses;
      if (dh >= 0 && dm >= 0 && dh + dm > 0) return dh / (dh + dm);
    }
    const all = s.block_cache_hits + s.block_cache_misses;
    return all > 0 ? s.block_cache_hits / all : null; // since the node started
  }

  // ---------- charts: small SVG line charts ----------

  function svgEl(tag, attrs, parent) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function niceStep(max) {
    const rough = max / 4;
    const mag = Math.pow(10, Math.floor(Math.log10(rough)));
    const n = rough / mag;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
  }

  // drawChart draws series ({name, color, pts: [[t, v or null]]}) up to now, over as much of the last
  // WINDOW_MS as there are samples for (at least a minute). opt: fmt (tick labels), max (fixed top),
  // minTop (smallest automatic top), empty (text when there is nothing to draw).
  function drawChart(id, series, opt) {
    const svg = $(id);
    const W = Math.max(200, svg.clientWidth || 400), H = Math.max(100, svg.clientHeight || 170);
    const L = 52, R = 8, T = 8, B = 18;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.replaceChildren();
    const now = Date.now();
    const span = Math.min(WINDOW_MS, Math.max(60000, samples.length ? now - samples[0].t : 0));
    const t0 = now - span;
    let max = 0, points = 0;
    for (const s of series) for (const [, v] of s.pts) if (v !== null && v > max) max = v;
    let top = opt.max || Math.max(max, opt.minTop || 1);
    const step = opt.max ? opt.max / 4 : niceStep(top);
    if (!opt.max) top = Math.ceil(top / step) * step;
    const x = (t) => L + ((t - t0) / span) * (W - L - R);
    const y = (v) => T + (1 - v / top) * (H - T - B);
    for (let v = 0; v <= top + step / 1000; v += step) {
      svgEl("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }, svg);
      svgEl("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, svg).textContent = opt.fmt(v);
    }
    const tick = [10e3, 15e3, 30e3, 60e3].find((s) => span / s <= 6) || 60e3;
    for (let k = 0; k * tick <= span + 1; k++) {
      const back = k * tick, t = now - back;
      svgEl("line", { class: "axis", x1: x(t), x2: x(t), y1: H - B, y2: H - B + 3 }, svg);
      svgEl("text", { x: x(t), y: H - 4, "text-anchor": k === 0 ? "end" : x(t) - L < 20 ? "start" : "middle" }, svg).textContent =
        k === 0 ? "now" : back % 60000 === 0 ? "−" + back / 60000 + " min" : "−" + back / 1000 + " s";
    }
    svgEl("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
    for (const s of series) {
      let d = "", pen = false;
      for (const [t, v] of s.pts) {
        if (t < t0 || v === null || v === undefined) {
          pen = false;
          continue;
        }
        d += (pen ? "L" : "M") + x(t).toFixed(1) + " " + y(Math.min(v, top)).toFixed(1);
        pen = true;
        points++;
      }
      if (d) svgEl("path", { class: "series", d, stroke: s.color, "data-series": s.name }, svg);
      const last = s.pts.filter(([t, v]) => t >= t0 && v !== null && v !== undefined).pop();
      if (last) svgEl("circle", { cx: x(last[0]), cy: y(Math.min(last[1], top)), r: 2.5, fill: s.color }, svg);
    }
    if (points === 0) {
      svgEl("text", { class: "nodata", x: (L + W - R) / 2, y: (T + H - B) / 2, "text-anchor": "middle" }, svg).textContent = opt.empty || "no data yet";
    }
    svg.dataset.points = points;
  }

  function legend(id, items) {
    const el = $(id);
    el.replaceChildren();
    for (const [name, color, value] of items) {
      const s = document.createElement("span");
      const i = document.createElement("i");
      i.style.background = color;
      s.append(i, name + " " + value);
      el.appendChild(s);
    }
  }

  function drawCharts() {
    const last = samples[samples.length - 1] || {};
    const pts = (f) => samples.map((s) => [s.t, f(s)]);
    drawChart("chart-throughput", [
      { name: "reads", color: COLORS.reads, pts: pts((s) => s.reads) },
      { name: "writes", color: COLORS.writes, pts: pts((s) => s.writes) },
    ], { fmt: num, minTop: 10 });
    legend("legend-throughput", [["reads", COLORS.reads, num(last.reads)], ["writes", COLORS.writes, num(last.writes)]]);
    drawChart("chart-latency", [
      { name: "p50", color: COLORS.p50, pts: pts((s) => s.p50) },
      { name: "p99", color: COLORS.p99, pts: pts((s) => s.p99) },
    ], { fmt: ms, minTop: 0.001, empty: "no data requests yet" });
    legend("legend-latency", [["p50", COLORS.p50, ms(last.p50)], ["p99", COLORS.p99, ms(last.p99)]]);
    drawChart("chart-hitratio", [{ name: "hit", color: COLORS.hit, pts: pts((s) => s.hit) }],
      { fmt: (v) => (v * 100).toFixed(0) + "%", max: 1, empty: "no block cache accesses yet" });
    legend("legend-hitratio", [["hits", COLORS.hit, pct(last.hit)]]);
    $("sum-ops").textContent = last.t ? num(last.reads + last.writes) : "–";
    $("sum-p99").textContent = ms(last.p99);
    $("sum-hit").textContent = pct(last.hit);
  }

  // ---------- decisions ----------

  function statusColor(st) {
    const s = String(st || "").split(":")[0];
    if (s === "succeeded") return "#1a7f37";
    if (s === "running") return "#0969da";
    if (s === "failed" || s === "timed out") return "#cf222e";
    return "#8c959f"; // canceled, replaced, stopped
  }

  function benefit(b) {
    if (!b || !b.metric) return ["–", ""];
    const scope = b.range ? " r" + b.range : b.from ? " n" + b.from + (b.to ? "→n" + b.to : "") : "";
    return [b.metric + scope + ": " + num(b.before) + " → " + num(b.before + b.delta) + " (" + (b.delta >= 0 ? "+" : "") + num(b.delta) + ")",
      b.detail || b.span || ""];
  }

  function measured(m, status) {
    if (!m) return [String(status || "").startsWith("succeeded") ? "pending" : "–", ""];
    return [num(m.before) + " → " + num(m.after) + " (" + (m.delta >= 0 ? "+" : "") + num(m.delta) + ")", m.detail || ""];
  }

  function twoLine(row, [main, detail], col) {
    const td = cell(row, main, "", col);
    if (detail) {
      const d = document.createElement("div");
      d.className = "detail";
      d.textContent = detail;
      td.appendChild(d);
    }
  }

  function renderDecisions(entries) {
    const sorted = entries.slice().sort((a, b) => Date.parse(b.time) - Date.parse(a.time) || b.id - a.id);
    fill("decisions", sorted.slice(0, 200), (r, e) => {
      r.dataset.decisionId = e.id;
      r.dataset.status = e.status;
      r.dataset.policy = e.policy;
      cell(r, clock(Date.parse(e.time)), "", "time");
      cell(r, e.policy, "", "policy");
      cell(r, e.operator, "op", "operator");
      cell(r, e.reason, "reason", "reason");
      twoLine(r, benefit(e.predicted), "predicted");
      twoLine(r, measured(e.measured, e.status), "measured");
      const td = cell(r, e.status, "", "outcome");
      td.style.color = statusColor(e.status);
    }, "no decisions yet: the autopilot has not acted");
    drawTimeline(entries);
  }

  // drawTimeline puts every decision on a time axis, one lane per policy.
  function drawTimeline(entries) {
    const svg = $("decision-timeline");
    const policies = [...new Set(entries.map((e) => e.policy))].sort();
    const lane = 18, L = 120, R = 12, T = 6, B = 18;
    const W = Math.max(300, svg.clientWidth || 800), H = T + B + Math.max(1, policies.length) * lane;
    svg.style.height = H + "px";
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.replaceChildren();
    const now = Date.now();
    const times = entries.map((e) => Date.parse(e.time)).filter(isFinite);
    const first = times.length ? Math.min(...times) : now;
    const t0 = Math.min(now - 2 * 60000, first - 0.03 * (now - first));
    const span = Math.max(1, now - t0);
    const x = (t) => L + ((t - t0) / span) * (W - L - R);
    for (let i = 0; i <= 4; i++) {
      const t = t0 + (span * i) / 4;
      svgEl("line", { class: "axis", x1: x(t), x2: x(t), y1: T, y2: H - B + 3 }, svg);
      svgEl("text", { x: x(t), y: H - 4, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" }, svg).textContent = clock(t);
    }
    policies.forEach((p, i) => {
      const yy = T + i * lane + lane / 2;
      svgEl("line", { class: "lane", x1: L, x2: W - R, y1: yy, y2: yy }, svg);
      svgEl("text", { x: L - 6, y: yy + 3, "text-anchor": "end" }, svg).textContent = p;
    });
    if (entries.length === 0) {
      svgEl("text", { class: "nodata", x: (L + W - R) / 2, y: T + lane / 2 + 4, "text-anchor": "middle" }, svg).textContent = "no decisions in the log";
    }
    for (const e of entries) {
      const t = Date.parse(e.time);
      if (!isFinite(t)) continue;
      const c = svgEl("circle", { cx: x(t), cy: T + policies.indexOf(e.policy) * lane + lane / 2, r: 5,
        fill: statusColor(e.status), "data-decision-id": e.id }, svg);
      svgEl("title", {}, c).textContent = clock(t) + " " + e.policy + ": " + e.operator + " — " + e.reason + " [" + e.status + "]";
    }
    svg.dataset.points = entries.length;
  }

  // ---------- the poll loop ----------

  function showErrors(errs) {
    const b = $("error-banner");
    b.replaceChildren();
    for (const e of errs) {
      const d = document.createElement("div");
      d.textContent = e;
      b.appendChild(d);
    }
    b.hidden = errs.length === 0;
  }

  async function refresh() {
    const [nodes, ranges, stats, decisions] = await Promise.allSettled(
      ["/api/nodes", "/api/ranges", "/api/stats", "/api/decisions"].map(get));
    const errs = [];
    for (const r of [nodes, ranges, stats, decisions]) if (r.status === "rejected") errs.push(String(r.reason.message || r.reason));
    const st = stats.status === "fulfilled" ? stats.value : null;
    if (st) addSample(st);
    if (nodes.status === "fulfilled") {
      renderNodes(nodes.value, st);
      $("sum-nodes").textContent = nodes.value.filter((n) => n.live).length + "/" + nodes.value.length;
    }
    if (ranges.status === "fulfilled") {
      renderRanges(ranges.value, st);
      $("sum-ranges").textContent = ranges.value.length;
    }
    if (decisions.status === "fulfilled") {
      lastDecisions = decisions.value;
      renderDecisions(lastDecisions);
    }
    drawCharts();
    if (st) {
      const silent = st.nodes.filter((n) => n.live && n.requests_error);
      for (const n of silent) errs.push("node " + n.id + ": no latency figures (" + n.requests_error + ")");
    }
    showErrors(errs);
    const status = $("status");
    if (nodes.status === "fulfilled" && ranges.status === "fulfilled") status.dataset.updated = Date.now();
    const updated = +status.dataset.updated;
    status.textContent = (updated ? "updated " + clock(updated) : "no answer yet") + (errs.length ? " — some requests fail" : "");
    status.className = errs.length ? "bad" : "muted";
  }

  async function loop() {
    const start = Date.now();
    try {
      await refresh();
    } catch (e) {
      showErrors([String(e.message || e)]);
    }
    setTimeout(loop, Math.max(100, POLL_MS - (Date.now() - start)));
  }

  function init() {
    takeTokenFromURL();
    $("auth").addEventListener("submit", (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $("token").value);
      $("token").value = "";
      $("auth").hidden = true;
    });
    window.addEventListener("resize", () => {
      drawCharts();
      if (lastDecisions) drawTimeline(lastDecisions);
    });
    loop();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();

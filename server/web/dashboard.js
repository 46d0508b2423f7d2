// Shoal dashboard: loads the last hour every node keeps (/api/history), then polls this node's JSON API
// every second and draws nodes, ranges and their health, charts of the whole cluster or of one node,
// the scan jobs and the autopilot's decision log. No libraries, no network access beyond this node's /api/.
//
// Elements carry data attributes for tests and scripts: #nodes rows data-node-id/data-live/data-state/
// data-admin, #ranges rows data-range-id/data-leader/data-replicas/data-learners/data-health, #jobs rows
// data-job/data-runs/data-running/data-outcome (the last run's: on time, late, failed), #decisions
// rows data-decision-id/data-status, every chart's <svg> data-points (points drawn) and
// data-history-points (of them, those from /api/history), #health data-under-replicated/
// data-unavailable/data-leaderless, #history-status data-loaded/data-points/data-from, body data-view.
"use strict";
(() => {
  const TOKEN_KEY = "shoal.authToken";
  const POLL_MS = 1000;
  const KEEP_MS = 60 * 60 * 1000; // the longest chart window
  const RATE_WINDOW_MS = 5000; // live latency quantiles, hit ratios and CPU are over this much time
  const SVG_NS = "http://www.w3.org/2000/svg";
  const COLORS = { reads: "#0969da", writes: "#bf3989", gp50: "#0969da", gp99: "#cf222e", rp50: "#8250df", rp99: "#bc4c00",
    hit: "#1a7f37", under: "#9a6700", unavail: "#cf222e" };
  const NODE_COLORS = ["#0969da", "#bf3989", "#1a7f37", "#bc4c00", "#8250df", "#cf222e", "#1b7c83", "#6e7781"];

  const $ = (id) => document.getElementById(id);

  // Derived points (one per history point or live poll): {t, reads, writes, hits, misses, hit, g50, g99,
  // gcount, r50, r99, rcount, cpu, mem, disk, cap, avail, ur, ua, q, hist}. hist is true for points
  // from /api/history.
  const nodeHist = new Map(); // node id → derived points from /api/history, oldest first
  let clusterHist = []; // the cluster's, aggregated from nodeHist
  const nodeLive = new Map(); // node id → derived points from the page's polls
  const clusterLive = [];
  const raws = []; // the last polls' cumulative figures: {t, nodes: Map(id → raw)}
  let liveStart = 0; // time of the first poll: history covers what came before
  let view = "all"; // "all" or a node id (string)
  let windowMs = KEEP_MS;
  let lastDecisions = null, lastNodes = null, lastStats = null;
  let historyState = "pending"; // pending, loading, done, failed
  let historyTries = 0;

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
    if (v === null || v === undefined || !isFinite(v)) return "–";
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
    if (secs === null || secs === undefined || !isFinite(secs)) return "–";
    if (secs === 0) return "0";
    const m = secs * 1000;
    if (m >= 1000) return (m / 1000).toFixed(m >= 10000 ? 0 : 1) + " s";
    if (m >= 10) return m.toFixed(0) + " ms";
    if (m >= 1) return m.toFixed(1) + " ms";
    if (m >= 0.1) return m.toFixed(2) + " ms";
    return (m * 1000).toFixed(0) + " µs";
  }

  function pct(r) {
    return r === null || r === undefined || !isFinite(r) ? "–" : (r * 100).toFixed(r >= 0.995 && r < 1 ? 1 : 0) + "%";
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

  function nodeColor(id) {
    return NODE_COLORS[(Number(id) - 1) % NODE_COLORS.length];
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

  function lastOf(arr) {
    return arr && arr.length ? arr[arr.length - 1] : null;
  }

  function renderNodes(nodes, stats) {
    const byID = new Map((stats ? stats.nodes : []).map((s) => [s.id, s]));
    fill("nodes", nodes, (r, n) => {
      const s = byID.get(n.id);
      const m = s && s.metrics;
      const d = lastOf(nodeLive.get(n.id));
      const live = liveness(n), admin = adminState(n);
      r.dataset.nodeId = n.id;
      r.dataset.live = String(!!n.live);
      r.dataset.state = n.state;
      r.dataset.admin = admin;
      r.className = "clickable" + (view === String(n.id) ? " selected" : "");
      r.title = "show node " + n.id + " alone";
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
      cell(r, n.profile || "–", "", "profile");
      cell(r, n.range_count, "num", "ranges");
      cell(r, n.leader_count, "num", "leaders");
      cell(r, s ? num(s.read_qps + s.write_qps) : "–", "num", "qps");
      cell(r, d && d.cpu !== null ? num(d.cpu) + "%" : "–", "num", "cpu");
      cell(r, m ? bytes(m.resident_bytes) : "–", "num", "mem");
      cell(r, s ? bytes(s.disk_bytes) : "–", "num", "disk");
      cell(r, m && m.capacity_bytes ? pct(1 - m.available_bytes / m.capacity_bytes) + " of " + bytes(m.capacity_bytes) : "–", "num", "volume");
      cell(r, pct(d ? d.hit : null), "num", "hit");
      // The usage model's figures (docs/design/usage.md): measured / predicted usage, 100 % saturated.
      const u = n.usage;
      const uc = cell(r, u ? pct(u.measured) + " / " + pct(u.predicted) : "–", "num", "usage");
      if (u) uc.title = "hit ratio predicted " + pct(u.predicted_hit_ratio) + ", observed " + pct(u.observed_hit_ratio);
      cell(r, s ? s.l0_files : "–", "num", "l0");
      cell(r, s ? ago(s.heartbeat_ms) : "–", "muted", "heartbeat");
      r.addEventListener("click", (ev) => {
        if (ev.target.closest("a")) return;
        setView(view === String(n.id) ? "all" : String(n.id));
      });
    }, "no nodes");
  }

  function rangeHealth(id, health) {
    if (!health) return "";
    if (health.unavailable.includes(id)) return "unavailable";
    if (health.under_replicated.includes(id)) return "under-replicated";
    return "ok";
  }

  function renderRanges(ranges, stats) {
    const byID = new Map((stats ? stats.ranges : []).map((s) => [s.id, s]));
    const health = stats && stats.health;
    fill("ranges", ranges, (r, g) => {
      const s = byID.get(g.id);
      r.dataset.rangeId = g.id;
      r.dataset.leader = g.leader || 0; // null: no leader known
      r.dataset.replicas = g.replicas.join(",");
      r.dataset.learners = g.learners.join(",");
      const h = rangeHealth(g.id, health);
      r.dataset.health = h;
      cell(r, g.id, "num", "id");
      const meta = g.meta; // the meta range: its span is not part of the user key space
      cell(r, meta ? "(meta range)" : "[" + key(g.start, "−∞") + ", " + key(g.end, "+∞") + ")", meta ? "key muted" : "key", "span");
      cell(r, g.replicas.join(", "), "", "replicas");
      cell(r, g.learners.join(", ") || "–", g.learners.length ? "" : "muted", "learners");
      cell(r, g.leader ? String(g.leader) : "none", g.leader ? "" : "bad", "leader");
      if (h) pill(r, h, h === "ok" ? "muted" : h === "unavailable" ? "bad" : "warn", "health");
      else cell(r, "–", "muted", "health");
      cell(r, s ? num(s.read_qps) + " / " + num(s.write_qps) : "–", "num", "qps");
      cell(r, s && s.leader ? bytes(s.bytes) : "–", "num", "size");
      cell(r, g.generation, "num", "generation");
    }, "no ranges");
  }

  function renderHealth(stats) {
    const el = $("health");
    const h = stats && stats.health;
    if (!h) {
      $("sum-under").textContent = $("sum-unavail").textContent = "–";
      el.className = "stat health";
      return;
    }
    el.dataset.underReplicated = h.under_replicated.length;
    el.dataset.unavailable = h.unavailable.length;
    el.dataset.leaderless = h.leaderless.length;
    $("sum-under").textContent = h.under_replicated.length;
    $("sum-unavail").textContent = h.unavailable.length;
    el.className = "stat health " + (h.unavailable.length ? "bad" : h.under_replicated.length ? "warn" : "ok");
  }

  // ---------- histograms ----------

  // quantile interpolates linearly inside the bucket holding rank q·count (as Prometheus'
  // histogram_quantile does); above the last finite bound it answers that bound.
  function quantile(q, bounds, cum, count) {
    if (!count || !bounds || !bounds.length) return null;
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
    return bounds[bounds.length - 1];
  }

  // merge adds histogram b ({bounds, buckets, count}) into a (null: a copy of b).
  function merge(a, b) {
    if (!b || !b.bounds || !b.count) return a;
    if (!a) return { bounds: b.bounds, buckets: b.buckets.slice(), count: b.count };
    if (a.bounds.length !== b.bounds.length) return a;
    for (let i = 0; i < b.buckets.length; i++) a.buckets[i] += b.buckets[i];
    a.count += b.count;
    return a;
  }

  function withQuantiles(p, g, r) {
    p.g50 = g ? quantile(0.5, g.bounds, g.buckets, g.count) : null;
    p.g99 = g ? quantile(0.99, g.bounds, g.buckets, g.count) : null;
    p.gcount = g ? g.count : 0;
    p.r50 = r ? quantile(0.5, r.bounds, r.buckets, r.count) : null;
    p.r99 = r ? quantile(0.99, r.bounds, r.buckets, r.count) : null;
    p.rcount = r ? r.count : 0;
    p.g = g;
    p.r = r;
    return p;
  }

  // ---------- history: /api/history once, then the polls ----------

  function fromHistoryPoint(hp, gb, rb) {
    const g = hp.grpc && hp.grpc.count ? { bounds: gb, buckets: hp.grpc.buckets, count: hp.grpc.count } : null;
    const r = hp.resp && hp.resp.count ? { bounds: rb, buckets: hp.resp.buckets, count: hp.resp.count } : null;
    const acc = hp.cache_hits + hp.cache_misses;
    return withQuantiles({ t: hp.t, hist: true, reads: hp.read_qps, writes: hp.write_qps, hits: hp.cache_hits, misses: hp.cache_misses,
      hit: acc > 0 ? hp.cache_hits / acc : null, cpu: hp.cpu_percent, mem: hp.mem_bytes || null, disk: hp.disk_bytes,
      cap: hp.disk_capacity_bytes, avail: hp.disk_available_bytes, ur: hp.under_replicated, ua: hp.unavailable, q: hp.quiesced }, g, r);
  }

  // aggregate sums nodes' points taken at the same time (a key per point) into the cluster's.
  function aggregate(groups) {
    const out = [];
    for (const pts of groups.values()) {
      let g = null, r = null;
      const p = { t: 0, hist: pts[0].hist, reads: 0, writes: 0, hits: 0, misses: 0, cpu: null, mem: null, disk: 0, ur: 0, ua: 0, q: 0 };
      for (const x of pts) {
        p.t = Math.max(p.t, x.t);
        p.reads += x.reads;
        p.writes += x.writes;
        p.hits += x.hits || 0;
        p.misses += x.misses || 0;
        p.disk += x.disk || 0;
        p.ur += x.ur || 0;
        p.ua += x.ua || 0;
        p.q += x.q || 0;
        g = merge(g, x.g);
        r = merge(r, x.r);
      }
      p.hit = p.hits + p.misses > 0 ? p.hits / (p.hits + p.misses) : null;
      out.push(withQuantiles(p, g, r));
    }
    out.sort((a, b) => a.t - b.t);
    return out;
  }

  async function loadHistory() {
    historyState = "loading";
    historyTries++;
    const st = $("history-status");
    let h;
    try {
      h = await get("/api/history");
    } catch (e) {
      historyState = historyTries < 5 ? "pending" : "failed";
      st.textContent = "history: " + (e.message || e);
      return;
    }
    const groups = new Map();
    let total = 0, from = 0, interval = 5000;
    const problems = [];
    const ends = [];
    for (const n of h.nodes) {
      if (n.error) problems.push("node " + n.node_id + ": " + n.error);
      const pts = (n.points || []).map((hp) => fromHistoryPoint(hp, n.grpc_bounds, n.resp_bounds));
      if (!pts.length) continue;
      interval = (n.interval_s || 5) * 1000;
      nodeHist.set(n.node_id, pts);
      total += pts.length;
      from = from ? Math.min(from, pts[0].t) : pts[0].t;
      ends.push(Math.floor(lastOf(pts).t / interval));
      for (const p of pts) {
        const k = Math.floor(p.t / interval);
        if (!groups.has(k)) groups.set(k, []);
        groups.get(k).push(p);
      }
    }
    // A node whose last point is older than another's has not sampled that interval yet: the
    // cluster's history ends where every node has.
    const end = ends.length ? Math.min(...ends) : 0;
    for (const k of [...groups.keys()]) if (k > end) groups.delete(k);
    clusterHist = aggregate(groups);
    historyState = "done";
    st.dataset.loaded = "true";
    st.dataset.points = total;
    st.dataset.from = from;
    st.textContent = total ? "history from " + clock(from) + " (" + total + " points from " + nodeHist.size + " nodes)" : "history: none yet";
    if (problems.length) st.textContent += "; " + problems.join("; ");
    drawCharts();
  }

  // ---------- live: counters to rates, histograms to quantiles ----------

  function rawOf(n) {
    const m = n.metrics;
    return { reads: n.read_qps, writes: n.write_qps, hits: n.block_cache_hits, misses: n.block_cache_misses, disk: n.disk_bytes,
      grpc: m ? m.grpc : null, resp: m ? m.resp : null, cpu: m ? m.cpu_seconds : null, mem: m ? m.resident_bytes : null,
      cap: m ? m.capacity_bytes : 0, avail: m ? m.available_bytes : 0, ur: m ? m.under_replicated : 0, ua: m ? m.unavailable : 0,
      q: m ? m.quiesced : 0 };
  }

  // delta is the requests between two cumulative readings (null when they cannot be compared).
  function delta(a, b) {
    if (!a || !b || b.count < a.count || !b.bounds || b.bounds.length !== a.bounds.length) return null;
    if (b.count === a.count) return { bounds: b.bounds, buckets: b.buckets.map(() => 0), count: 0 };
    return { bounds: b.bounds, buckets: b.buckets.map((v, i) => v - a.buckets[i]), count: b.count - a.count };
  }

  // baseRaw is the newest poll at least RATE_WINDOW_MS older than t (or else the oldest, if it is at
  // least a poll older).
  function baseRaw(t) {
    for (let i = raws.length - 1; i >= 0; i--) if (raws[i].t <= t - RATE_WINDOW_MS) return raws[i];
    if (raws.length > 0 && raws[0].t <= t - POLL_MS * 0.8) return raws[0];
    return null;
  }

  function addLive(stats) {
    const t = Date.now();
    if (!liveStart) liveStart = t;
    const cur = { t, nodes: new Map() };
    for (const n of stats.nodes) cur.nodes.set(n.id, rawOf(n));
    const base = baseRaw(t);
    const clusterPts = [];
    for (const [id, b] of cur.nodes) {
      const a = base && base.nodes.get(id);
      const p = { t, hist: false, reads: b.reads, writes: b.writes, hits: 0, misses: 0, hit: null, cpu: null, mem: b.mem, disk: b.disk,
        cap: b.cap, avail: b.avail, ur: b.ur, ua: b.ua, q: b.q };
      let g = null, r = null;
      // A node whose counters went down restarted: it is left out of this window.
      if (a && b.hits >= a.hits && b.misses >= a.misses) {
        p.hits = b.hits - a.hits;
        p.misses = b.misses - a.misses;
        p.hit = p.hits + p.misses > 0 ? p.hits / (p.hits + p.misses) : null;
      }
      if (a && a.cpu !== null && b.cpu !== null && b.cpu >= a.cpu) p.cpu = (100 * (b.cpu - a.cpu)) / ((t - base.t) / 1000);
      if (a) {
        g = delta(a.grpc, b.grpc);
        r = delta(a.resp, b.resp);
      }
      withQuantiles(p, g && g.count ? g : null, r && r.count ? r : null);
      if (!nodeLive.has(id)) nodeLive.set(id, []);
      nodeLive.get(id).push(p);
      clusterPts.push(p);
    }
    const c = aggregate(new Map([[t, clusterPts.length ? clusterPts : [{ t, reads: 0, writes: 0 }]]]))[0];
    c.t = t;
    if (stats.health) {
      // The whole cluster's health comes from the meta range's list (it sees ranges none of whose
      // voters lives, which no node counts).
      c.ur = stats.health.under_replicated.length;
      c.ua = stats.health.unavailable.length;
    }
    clusterLive.push(c);
    raws.push(cur);
    while (raws.length > 0 && raws[0].t < t - 2 * RATE_WINDOW_MS) raws.shift();
    const cutoff = t - KEEP_MS;
    while (clusterLive.length && clusterLive[0].t < cutoff) clusterLive.shift();
    for (const pts of nodeLive.values()) while (pts.length && pts[0].t < cutoff) pts.shift();
  }

  // series is the points of the cluster or of one node: the history up to the first poll, then the polls.
  function series(id) {
    const hist = id === "all" ? clusterHist : nodeHist.get(Number(id)) || [];
    const live = id === "all" ? clusterLive : nodeLive.get(Number(id)) || [];
    const before = liveStart ? hist.filter((p) => p.t < liveStart) : hist;
    return before.concat(live);
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

  // drawChart draws series ({name, color, pts: [{t, v, hist}]}) up to now, over as much of the chosen
  // window as there are points for (at least a minute). opt: fmt (tick labels), max (fixed top),
  // minTop (smallest automatic top), log (logarithmic axis), empty (text when there is nothing to draw),
  // marks (times to mark with a tick: autopilot decisions).
  function drawChart(id, lines, opt) {
    const svg = $(id);
    const W = Math.max(200, svg.clientWidth || 400), H = Math.max(100, svg.clientHeight || 170);
    const L = 56, R = 8, T = 8, B = 18;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.replaceChildren();
    const now = Date.now();
    let first = now;
    for (const s of lines) for (const p of s.pts) if (p.v !== null && p.v !== undefined) first = Math.min(first, p.t);
    const span = Math.min(windowMs, Math.max(60000, now - first));
    const t0 = now - span;
    let max = 0, min = Infinity, points = 0, histPoints = 0;
    for (const s of lines) {
      for (const p of s.pts) {
        if (p.t < t0 || p.v === null || p.v === undefined || !isFinite(p.v)) continue;
        max = Math.max(max, p.v);
        if (p.v > 0) min = Math.min(min, p.v);
      }
    }
    const x = (t) => L + ((t - t0) / span) * (W - L - R);
    let y, ticks = [], top, bottom = 0;
    if (opt.log) {
      const lo = Math.pow(10, Math.floor(Math.log10(isFinite(min) ? min : 1e-4)));
      const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(max, lo * 10))));
      const a = Math.log10(lo), b = Math.log10(hi);
      y = (v) => T + (1 - (Math.log10(Math.max(v, lo)) - a) / (b - a)) * (H - T - B);
      for (let v = lo; v <= hi * 1.001; v *= 10) ticks.push(v);
      top = hi;
      bottom = lo;
    } else {
      top = opt.max || Math.max(max, opt.minTop || 1);
      const step = opt.max ? opt.max / 4 : niceStep(top);
      if (!opt.max) top = Math.ceil(top / step) * step;
      y = (v) => T + (1 - v / top) * (H - T - B);
      for (let v = 0; v <= top + step / 1000; v += step) ticks.push(v);
    }
    for (const v of ticks) {
      svgEl("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }, svg);
      svgEl("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, svg).textContent = opt.fmt(v);
    }
    // Ticks at least 48 px apart, so that their labels never overlap.
    const tick = [10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3].find((s) => ((W - L - R) * s) / span >= 48) || 1800e3;
    for (let k = 0; k * tick <= span + 1; k++) {
      const back = k * tick, t = now - back;
      svgEl("line", { class: "axis", x1: x(t), x2: x(t), y1: H - B, y2: H - B + 3 }, svg);
      svgEl("text", { x: x(t), y: H - 4, "text-anchor": k === 0 ? "end" : x(t) - L < 20 ? "start" : "middle" }, svg).textContent =
        k === 0 ? "now" : back % 60000 === 0 ? "−" + back / 60000 + " min" : "−" + back / 1000 + " s";
    }
    svgEl("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
    if (liveStart && liveStart > t0 && first < liveStart) {
      // Where the page's own polls take over from the nodes' history.
      svgEl("line", { class: "opened", x1: x(liveStart), x2: x(liveStart), y1: T, y2: H - B }, svg);
    }
    for (const mt of opt.marks || []) {
      if (mt < t0) continue;
      const m = svgEl("line", { class: "mark", x1: x(mt), x2: x(mt), y1: T, y2: T + 6 }, svg);
      svgEl("title", {}, m).textContent = "autopilot decision at " + clock(mt);
    }
    const clamp = (v) => Math.min(Math.max(v, bottom), top);
    for (const s of lines) {
      let d = "", pen = false, lastPt = null;
      for (const p of s.pts) {
        if (p.t < t0 || p.v === null || p.v === undefined || !isFinite(p.v) || (opt.log && p.v <= 0)) {
          pen = false;
          continue;
        }
        d += (pen ? "L" : "M") + x(p.t).toFixed(1) + " " + y(clamp(p.v)).toFixed(1);
        pen = true;
        points++;
        if (p.hist) histPoints++;
        lastPt = p;
      }
      if (d) svgEl("path", { class: "series" + (s.dash ? " dashed" : ""), d, stroke: s.color, "data-series": s.name }, svg);
      if (lastPt) svgEl("circle", { cx: x(lastPt.t), cy: y(clamp(lastPt.v)), r: 2.5, fill: s.color }, svg);
    }
    if (points === 0) {
      svgEl("text", { class: "nodata", x: (L + W - R) / 2, y: (T + H - B) / 2, "text-anchor": "middle" }, svg).textContent = opt.empty || "no data yet";
    }
    svg.dataset.points = points;
    svg.dataset.historyPoints = histPoints;
  }

  function legend(id, items) {
    const el = $(id);
    el.replaceChildren();
    for (const [name, color, value] of items) {
      const s = document.createElement("span");
      const i = document.createElement("i");
      i.style.background = color;
      s.append(i, name + (value === undefined ? "" : " " + value));
      el.appendChild(s);
    }
  }

  function lastValue(pts, f) {
    for (let i = pts.length - 1; i >= 0; i--) {
      const v = f(pts[i]);
      if (v !== null && v !== undefined && isFinite(v)) return v;
    }
    return null;
  }

  function decisionTimes() {
    return (lastDecisions || []).map((e) => Date.parse(e.time)).filter(isFinite);
  }

  function drawCharts() {
    const pts = series(view);
    const line = (name, color, f, dash) => ({ name, color, dash, pts: pts.map((p) => ({ t: p.t, v: f(p), hist: p.hist })) });
    const marks = decisionTimes();
    drawChart("chart-throughput", [line("reads", COLORS.reads, (p) => p.reads), line("writes", COLORS.writes, (p) => p.writes)],
      { fmt: num, minTop: 10, marks });
    legend("legend-throughput", [["reads", COLORS.reads, num(lastValue(pts, (p) => p.reads))],
      ["writes", COLORS.writes, num(lastValue(pts, (p) => p.writes))]]);
    drawChart("chart-latency", [
      line("gRPC p50", COLORS.gp50, (p) => p.g50), line("gRPC p99", COLORS.gp99, (p) => p.g99),
      line("RESP p50", COLORS.rp50, (p) => p.r50, true), line("RESP p99", COLORS.rp99, (p) => p.r99, true),
    ], { fmt: ms, log: true, empty: "no data requests yet", marks });
    legend("legend-latency", [["gRPC p50", COLORS.gp50, ms(lastValue(pts, (p) => p.g50))], ["gRPC p99", COLORS.gp99, ms(lastValue(pts, (p) => p.g99))],
      ["RESP p50", COLORS.rp50, ms(lastValue(pts, (p) => p.r50))], ["RESP p99", COLORS.rp99, ms(lastValue(pts, (p) => p.r99))]]);
    drawChart("chart-hitratio", [line("hit", COLORS.hit, (p) => p.hit)],
      { fmt: (v) => (v * 100).toFixed(0) + "%", max: 1, empty: "no block cache accesses yet" });
    legend("legend-hitratio", [["hits", COLORS.hit, pct(lastValue(pts, (p) => p.hit))]]);
    drawChart("chart-health", [line("under-replicated", COLORS.under, (p) => p.ur), line("unavailable", COLORS.unavail, (p) => p.ua)],
      { fmt: num, minTop: 2 });
    legend("legend-health", [["under-replicated", COLORS.under, num(lastValue(pts, (p) => p.ur))],
      ["unavailable", COLORS.unavail, num(lastValue(pts, (p) => p.ua))]]);

    // Resources: one line per node (only the chosen one in a node's view).
    const ids = [...new Set([...nodeHist.keys(), ...nodeLive.keys()])].sort((a, b) => a - b)
      .filter((id) => view === "all" || String(id) === view);
    const perNode = (f) => ids.map((id) => ({ name: "n" + id, color: nodeColor(id),
      pts: series(String(id)).map((p) => ({ t: p.t, v: f(p), hist: p.hist })) }));
    const nodeLegend = (f, fmt) => ids.map((id) => ["n" + id, nodeColor(id), fmt(lastValue(series(String(id)), f))]);
    drawChart("chart-cpu", perNode((p) => p.cpu), { fmt: (v) => num(v) + "%", minTop: 10 });
    legend("legend-cpu", nodeLegend((p) => p.cpu, (v) => num(v) + "%"));
    drawChart("chart-mem", perNode((p) => p.mem), { fmt: bytes, minTop: 64 << 20 });
    legend("legend-mem", nodeLegend((p) => p.mem, bytes));
    drawChart("chart-disk", perNode((p) => p.disk), { fmt: bytes, minTop: 1 << 20 });
    legend("legend-disk", nodeLegend((p) => p.disk, bytes));

    const c = lastOf(clusterLive) || {};
    $("sum-ops").textContent = c.t ? num(c.reads + c.writes) : "–";
    $("sum-p99").textContent = ms(c.g99);
    $("sum-hit").textContent = pct(c.hit);
  }

  // ---------- one node's view ----------

  function setView(v) {
    view = v;
    document.body.dataset.view = v;
    $("node-select").value = v;
    renderNodeDetail();
    if (lastNodes) renderNodes(lastNodes, lastStats);
    drawCharts();
  }

  function renderNodeSelect(nodes) {
    const sel = $("node-select");
    const want = ["all", ...nodes.map((n) => String(n.id))];
    const have = [...sel.options].map((o) => o.value);
    if (want.join() === have.join()) return;
    sel.replaceChildren();
    for (const v of want) {
      const o = document.createElement("option");
      o.value = v;
      o.textContent = v === "all" ? "whole cluster" : "node " + v;
      sel.appendChild(o);
    }
    sel.value = want.includes(view) ? view : "all";
  }

  function renderNodeDetail() {
    const panel = $("node-detail");
    if (view === "all") {
      panel.hidden = true;
      delete panel.dataset.nodeId;
      return;
    }
    panel.hidden = false;
    panel.dataset.nodeId = view;
    const n = (lastNodes || []).find((x) => String(x.id) === view);
    const s = lastStats && lastStats.nodes.find((x) => String(x.id) === view);
    const m = s && s.metrics;
    const d = lastOf(nodeLive.get(Number(view)));
    $("nd-id").textContent = view;
    $("nd-addr").textContent = n ? n.addr + (n.http_addr ? " · http " + n.http_addr : "") + " · " + (n.live ? "live" : n.state) : "";
    const figures = [
      ["QPS (reads / writes)", s ? num(s.read_qps) + " / " + num(s.write_qps) : "–", "qps"],
      ["meta-range lookups", s ? num(s.meta_qps) + " ops/s" : "–", "meta_qps"],
      ["gRPC p50 / p99", d ? ms(d.g50) + " / " + ms(d.g99) : "–", "grpc"],
      ["RESP p50 / p99", d ? ms(d.r50) + " / " + ms(d.r99) : "–", "resp"],
      ["CPU", d && d.cpu !== null ? num(d.cpu) + "% of a core" : "–", "cpu"],
      ["memory (resident)", m ? bytes(m.resident_bytes) : "–", "mem"],
      ["store", s ? bytes(s.disk_bytes) : "–", "disk"],
      ["volume", m && m.capacity_bytes ? bytes(m.capacity_bytes - m.available_bytes) + " used of " + bytes(m.capacity_bytes) : "–", "volume"],
      ["replicas / leaders / quiesced", n ? n.range_count + " / " + n.leader_count + " / " + (m ? m.quiesced : "–") : "–", "replicas"],
      ["ranges it answers for: under-replicated / unavailable", m ? m.under_replicated + " / " + m.unavailable : "–", "health"],
      ["cache hit ratio", pct(d ? d.hit : null), "hit"],
    ];
    const dl = $("nd-figures");
    dl.replaceChildren();
    for (const [name, value, col] of figures) {
      const dt = document.createElement("dt");
      dt.textContent = name;
      const dd = document.createElement("dd");
      dd.textContent = value;
      dd.dataset.col = col;
      dl.append(dt, dd);
    }
    if (s && s.metrics_error) {
      const dd = document.createElement("dd");
      dd.className = "bad";
      dd.textContent = s.metrics_error;
      dl.append(dd);
    }
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

  function throughput(tp, status) {
    if (!tp || !tp.before) return ["–", tp && tp.detail ? tp.detail : ""];
    const span = tp.span + (tp.detail ? " — " + tp.detail : "");
    if (!tp.after) {
      const pending = String(status || "").startsWith("succeeded") || status === "running";
      return [num(tp.before.qps) + " ops/s → " + (pending ? "…" : "–"), span];
    }
    const b = tp.before.qps, a = tp.after.qps;
    const change = b > 0 ? " (" + (a >= b ? "+" : "−") + Math.abs((100 * (a - b)) / b).toFixed(0) + "%)" : "";
    return [num(b) + " → " + num(a) + " ops/s" + change, span];
  }

  // p99 is the 99th percentile latency of the requests the span's leaders served in the window before
  // the operator and in the window after it (p50 and the number of requests timed below it).
  function p99(tp, status) {
    if (!tp || !tp.before) return ["–", ""];
    const b = tp.before, a = tp.after;
    const at = (w) => (w && w.p99_ms != null ? ms(w.p99_ms / 1000) : "–");
    const p50 = (w) => (w && w.p50_ms != null ? ms(w.p50_ms / 1000) : "–");
    if (!a) {
      if (b.p99_ms == null) return ["–", "no request timed before"];
      const pending = String(status || "").startsWith("succeeded") || status === "running";
      return [at(b) + " → " + (pending ? "…" : "–"), "p50 " + p50(b) + "; " + num(b.timed) + " requests timed"];
    }
    if (b.p99_ms == null && a.p99_ms == null) return ["–", "no request timed"];
    const change = b.p99_ms > 0 && a.p99_ms != null
      ? " (" + (a.p99_ms >= b.p99_ms ? "+" : "−") + Math.abs((100 * (a.p99_ms - b.p99_ms)) / b.p99_ms).toFixed(0) + "%)" : "";
    return [at(b) + " → " + at(a) + change, "p50 " + p50(b) + " → " + p50(a) + "; " + num(b.timed || 0) + " → " + num(a.timed || 0) + " requests timed"];
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
      twoLine(r, throughput(e.throughput, e.status), "throughput");
      twoLine(r, p99(e.throughput, e.status), "p99");
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
      const tp = throughput(e.throughput, e.status)[0], lat = p99(e.throughput, e.status)[0];
      svgEl("title", {}, c).textContent = clock(t) + " " + e.policy + ": " + e.operator + " — " + e.reason + " [" + e.status + "]" +
        (tp !== "–" ? "; throughput " + tp : "") + (lat !== "–" ? "; p99 " + lat : "");
    }
    svg.dataset.points = entries.length;
  }

  // ---------- scan jobs ----------

  // goDuration shortens a Go duration ("1h0m0s" → "1h", "10m0s" → "10m").
  function goDuration(d) {
    return String(d || "–").replace(/([hm])0s$/, "$1").replace(/h0m$/, "h");
  }

  function jobKey(k, enc) {
    return enc ? "base64:" + k : k;
  }

  function jobReads(j) {
    const what = j.action === "export" ? "export to " + j.output_dir : "count";
    if (j.table) return ["table " + j.table, what];
    return ["[" + jobKey(j.span.start, j.span.start_encoding) + ", " + jobKey(j.span.end, j.span.end_encoding) + ")", what];
  }

  // until says how far t (RFC 3339) is from now: "in 12 s", or how long ago it passed.
  function until(t) {
    const at = Date.parse(t);
    if (!isFinite(at)) return "–";
    const s = (at - Date.now()) / 1000;
    const mag = Math.abs(s);
    const text = mag < 120 ? mag.toFixed(0) + " s" : mag < 7200 ? (mag / 60).toFixed(0) + " min" : (mag / 3600).toFixed(1) + " h";
    return s >= 0 ? "in " + text : text + " ago";
  }

  function jobRunning(r) {
    if (!r) return ["–", ""];
    const ranges = r.ranges_total ? r.ranges_done + "/" + r.ranges_total + " ranges" : r.ranges_done + " ranges";
    return ["node " + r.node + ": " + ranges + ", " + num(r.rows) + " rows", bytes(r.bytes) + " since " + clock(Date.parse(r.started)) +
      (r.progress ? "; recorded " + ago(Date.parse(r.progress)) : "")];
  }

  function renderJobs(jobs) {
    fill("jobs", jobs, (row, j) => {
      const last = j.last.length ? j.last[0] : null;
      row.dataset.job = j.name;
      row.dataset.runs = j.runs;
      row.dataset.running = String(!!j.running);
      row.dataset.outcome = last ? last.outcome : "";
      cell(row, j.name, "", "name");
      twoLine(row, jobReads(j), "reads");
      cell(row, goDuration(j.every) + " / " + goDuration(j.deadline), "", "schedule");
      cell(row, until(j.next_due), "", "next-due").title = j.next_due;
      cell(row, j.runs, "num", "runs");
      cell(row, j.on_time, "num", "on-time");
      cell(row, j.late + (j.last_failed ? " (" + j.last_failed + ")" : ""), "num" + (j.late ? " warn" : ""), "late");
      const refused = cell(row, j.refused, "num" + (j.refused ? " warn" : ""), "refused");
      if (j.admission && j.admission !== "admitted") {
        const d = document.createElement("div");
        d.className = "detail";
        d.textContent = j.admission;
        refused.appendChild(d);
      }
      twoLine(row, jobRunning(j.running), "running");
      if (!last) {
        cell(row, "none yet", "muted", "last");
        return;
      }
      const td = pill(row, last.outcome + (last.outcome === "late" ? " by " + ms(last.late_ms / 1000) : ""),
        last.outcome === "on time" ? "ok" : last.outcome === "late" ? "warn" : "bad", "last");
      const took = Date.parse(last.finished) - Date.parse(last.started);
      const d = document.createElement("div");
      d.className = "detail";
      d.textContent = last.error || num(last.rows) + " rows, " + bytes(last.bytes) + (last.cache_bytes ? " (" + bytes(last.cache_bytes) + " from a copy)" : "") +
        (isFinite(took) ? " in " + ms(took / 1000) : "") + ", " + clock(Date.parse(last.finished));
      td.appendChild(d);
    }, "no scan jobs (shoal job add)");
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
    if (historyState === "pending") loadHistory(); // not awaited: the polls go on meanwhile
    const [nodes, ranges, stats, decisions, jobs] = await Promise.allSettled(
      ["/api/nodes", "/api/ranges", "/api/stats", "/api/decisions", "/api/jobs"].map(get));
    const errs = [];
    for (const r of [nodes, ranges, stats, decisions, jobs]) if (r.status === "rejected") errs.push(String(r.reason.message || r.reason));
    const st = stats.status === "fulfilled" ? stats.value : null;
    if (st) {
      addLive(st);
      lastStats = st;
      renderHealth(st);
    }
    if (nodes.status === "fulfilled") {
      lastNodes = nodes.value;
      renderNodeSelect(lastNodes);
      renderNodes(lastNodes, st);
      $("sum-nodes").textContent = lastNodes.filter((n) => n.live).length + "/" + lastNodes.length;
    }
    if (ranges.status === "fulfilled") {
      renderRanges(ranges.value, st);
      $("sum-ranges").textContent = ranges.value.length;
    }
    if (decisions.status === "fulfilled") {
      lastDecisions = decisions.value;
      renderDecisions(lastDecisions);
    }
    if (jobs.status === "fulfilled") renderJobs(jobs.value);
    drawCharts();
    renderNodeDetail();
    if (st) {
      const silent = st.nodes.filter((n) => n.live && n.metrics_error);
      for (const n of silent) errs.push("node " + n.id + ": no latency, CPU or memory figures (" + n.metrics_error + ")");
      if (st.health_error) errs.push("range health: " + st.health_error);
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
      if (historyState === "failed") historyState = "pending";
    });
    $("node-select").addEventListener("change", (ev) => setView(ev.target.value));
    $("nd-close").addEventListener("click", () => setView("all"));
    $("window-select").addEventListener("change", (ev) => {
      windowMs = Number(ev.target.value) * 1000;
      drawCharts();
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

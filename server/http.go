package server

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/http/pprof"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shoaldb/shoal/node/history"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/apijson"
)

// webFS holds the dashboard: index.html plus the script and style sheet it loads from /assets/. Everything
// is embedded in the binary; the page loads nothing from anywhere else.
//
//go:embed web
var webFS embed.FS

// dashboardCSP is the dashboard's Content-Security-Policy: scripts, styles and API calls from this node
// only, no inline script, no framing.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// clusterStatus is the part of the node's public API that the HTTP endpoints read (node.Node serves it as
// part of pb.ShoalServer).
type clusterStatus interface {
	Nodes(context.Context, *pb.NodesRequest) (*pb.NodesResponse, error)
	Ranges(context.Context, *pb.RangesRequest) (*pb.RangesResponse, error)
	Decisions(context.Context, *pb.DecisionsRequest) (*pb.DecisionsResponse, error)
	Jobs(context.Context, *pb.JobsRequest) (*pb.JobsResponse, error)
}

// nodeIdentity is the node whose HTTP surface this is (node.Node; the tests' fakes may not be one).
type nodeIdentity interface {
	NodeID() uint64
}

// apiTimeout bounds one /api/ call into the node (a cluster without quorum must not hang the page).
const apiTimeout = 5 * time.Second

// errorJSON is the body of every HTTP error answer.
type errorJSON struct {
	Error string `json:"error"`
}

// httpDeps is what the HTTP handler needs from the running node.
type httpDeps struct {
	status clusterStatus
	ready  *atomic.Bool
	// stopping reports that the node is draining for a stop (nil: never): readiness turns false first.
	stopping func() bool
	// catchingUp reports that the node's replicas are still catching up after its start (nil:
	// never): an orchestrator's rolling restart stops the next node only once this one is ready.
	catchingUp func() bool
	metrics    http.Handler
	auth       tokenChecker
	// history is the node's recent stats (nil: none kept); the caller wires its latencies in.
	history *history.Recorder
}

// newHTTPHandler builds the node's HTTP surface:
//
//	/healthz       200 "ok" once the node serves and its replicas caught up, 503 before and once it drains for a stop (open)
//	/metrics       Prometheus exposition (open)
//	/api/nodes     node list, JSON (token)
//	/api/ranges    range list, JSON (token)
//	/api/decisions the autopilot's decision log, JSON (token)
//	/api/jobs      the scan jobs with their counts, run going on and last outcomes, JSON (token)
//	/api/stats     load of every node and the ranges' health, for the dashboard, JSON (token; statsJSON)
//	/api/history   the last hour of every node's stats (?node=local: this node's), JSON (token; historyJSON)
//	/debug/pprof/  Go profiling (token)
//	/              the dashboard page (open; it sends the token, if the user gives one, to /api/)
//	/assets/       the dashboard's script and style sheet (open)
func newHTTPHandler(d httpDeps) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", d.healthz)
	mux.Handle("GET /metrics", d.metrics)
	d.listAPI(mux)
	mux.HandleFunc("GET /api/stats", d.api(d.stats))
	mux.HandleFunc("GET /api/history", d.apiRequest(d.historyAPI))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorJSON{Error: "no such API endpoint: " + r.URL.Path})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		serveWebFile(w, r, "index.html")
	})
	mux.HandleFunc("GET /assets/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if ext := path.Ext(name); ext != ".js" && ext != ".css" {
			http.NotFound(w, r)
			return
		}
		serveWebFile(w, r, name)
	})
	return d.auth.httpMiddleware(mux, "/api/", "/debug/")
}

// healthz answers /healthz: ok once the node serves and its replicas caught up, until it drains for a stop.
func (d *httpDeps) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !d.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready\n"))
		return
	}
	if d.stopping != nil && d.stopping() {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("stopping\n"))
		return
	}
	if d.catchingUp != nil && d.catchingUp() {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("catching up\n"))
		return
	}
	w.Write([]byte("ok\n"))
}

// listAPI adds the endpoints that answer what the CLI's lists print: nodes, ranges, the decision log
// and the scan jobs.
func (d *httpDeps) listAPI(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/nodes", d.api(func(ctx context.Context, w http.ResponseWriter) {
		resp, err := d.status.Nodes(ctx, &pb.NodesRequest{})
		if msg, code := apiError(err, resp.GetError()); code != 0 {
			writeJSON(w, code, errorJSON{Error: "list nodes: " + msg})
			return
		}
		writeJSON(w, http.StatusOK, apijson.NodesJSON(resp.GetNodes()))
	}))
	mux.HandleFunc("GET /api/ranges", d.api(func(ctx context.Context, w http.ResponseWriter) {
		resp, err := d.status.Ranges(ctx, &pb.RangesRequest{})
		if msg, code := apiError(err, resp.GetError()); code != 0 {
			writeJSON(w, code, errorJSON{Error: "list ranges: " + msg})
			return
		}
		writeJSON(w, http.StatusOK, apijson.RangesJSON(resp.GetRanges()))
	}))
	mux.HandleFunc("GET /api/decisions", d.api(func(ctx context.Context, w http.ResponseWriter) {
		resp, err := d.status.Decisions(ctx, &pb.DecisionsRequest{})
		if msg, code := apiError(err, resp.GetError()); code != 0 {
			writeJSON(w, code, errorJSON{Error: "decision log: " + msg})
			return
		}
		raw := resp.GetEntriesJson()
		if len(raw) == 0 || string(raw) == "null" {
			raw = []byte("[]")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(append(raw, '\n'))
	}))
	// The same call as `shoal job list`: any node answers from the meta range.
	mux.HandleFunc("GET /api/jobs", d.api(func(ctx context.Context, w http.ResponseWriter) {
		resp, err := d.status.Jobs(ctx, &pb.JobsRequest{})
		if msg, code := apiError(err, resp.GetError()); code != 0 {
			writeJSON(w, code, errorJSON{Error: "list scan jobs: " + msg})
			return
		}
		writeJSON(w, http.StatusOK, apijson.JobsJSON(resp.GetJobs()))
	}))
}

// stats answers /api/stats.
func (d *httpDeps) stats(ctx context.Context, w http.ResponseWriter) {
	var ranges *pb.RangesResponse
	var rangesErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ranges, rangesErr = d.status.Ranges(ctx, &pb.RangesRequest{})
	}()
	resp, err := d.status.Nodes(ctx, &pb.NodesRequest{})
	<-done
	if msg, code := apiError(err, resp.GetError()); code != 0 {
		writeJSON(w, code, errorJSON{Error: "node stats: " + msg})
		return
	}
	factor := history.DefaultFactor
	if d.history != nil {
		factor = d.history.Factor()
	}
	st := buildStats(ctx, resp.GetNodes(), fetchNodeMetrics, time.Now())
	if msg, code := apiError(rangesErr, ranges.GetError()); code != 0 {
		st.HealthError = "list ranges: " + msg
	} else {
		st.Health = rangeHealth(resp.GetNodes(), ranges.GetRanges(), factor)
	}
	writeJSON(w, http.StatusOK, st)
}

// historyAPI answers /api/history.
func (d *httpDeps) historyAPI(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	hist := d.history
	if hist == nil {
		writeJSON(w, http.StatusNotFound, errorJSON{Error: "this node keeps no history"})
		return
	}
	since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	self := localHistory(hist, d.status.(nodeIdentity).NodeID(), since)
	if r.URL.Query().Get("node") == "local" {
		writeJSON(w, http.StatusOK, self)
		return
	}
	resp, err := d.status.Nodes(ctx, &pb.NodesRequest{})
	if msg, code := apiError(err, resp.GetError()); code != 0 {
		writeJSON(w, code, errorJSON{Error: "list nodes: " + msg})
		return
	}
	fetch := func(ctx context.Context, addr string) (historyJSON, error) {
		return fetchHistory(ctx, addr, r.Header.Get("Authorization"), since)
	}
	writeJSON(w, http.StatusOK, buildHistory(ctx, resp.GetNodes(), self, fetch, time.Now()))
}

// api wraps a JSON API handler: it answers 503 until the node serves and bounds the call by
// apiTimeout.
func (d *httpDeps) api(h func(ctx context.Context, w http.ResponseWriter)) http.HandlerFunc {
	return d.apiRequest(func(ctx context.Context, w http.ResponseWriter, _ *http.Request) { h(ctx, w) })
}

// apiRequest is api for handlers that read the request.
func (d *httpDeps) apiRequest(h func(ctx context.Context, w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !d.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, errorJSON{Error: "node is not serving yet"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		h(ctx, w, r)
	}
}

// apiError turns a failed admin call into a message and an HTTP status (0 when the call succeeded).
func apiError(err error, perr *pb.Error) (string, int) {
	switch {
	case err != nil:
		return err.Error(), http.StatusBadGateway
	case perr != nil && perr.GetCode() != pb.ErrorCode_OK:
		code := http.StatusServiceUnavailable
		if perr.GetCode() == pb.ErrorCode_INVALID_ARGUMENT {
			code = http.StatusBadRequest
		}
		return perr.GetCode().String() + ": " + perr.GetMessage(), code
	}
	return "", 0
}

// writeJSON writes v as a JSON answer with the given status, encoded as the CLI's --format json does
// (compact, HTML characters unescaped, one trailing newline), so both print the same bytes.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":"encode response"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// serveWebFile serves one embedded dashboard file (404 if there is none by that name).
func serveWebFile(w http.ResponseWriter, r *http.Request, name string) {
	b, err := fs.ReadFile(webFS, "web/"+name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ct := "text/html; charset=utf-8"
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("Referrer-Policy", "no-referrer")
	w.Write(b)
}

// ---------- /api/stats: the dashboard's live figures ----------

// statsJSON is the body of /api/stats: what the heartbeats say about every node and range (load,
// disk, block cache), what each live node's /metrics says (requests and their latency, CPU, memory,
// its volume, the ranges it answers for), and the health of every range. Figures are cumulative or
// rates measured by the nodes; the dashboard turns counters into rates and quantiles from the
// difference between two polls.
type statsJSON struct {
	TimeMs int64            `json:"time_ms"` // when this node answered (Unix ms)
	Nodes  []nodeStatsJSON  `json:"nodes"`
	Ranges []rangeStatsJSON `json:"ranges"`
	// Health is every range's state, from the meta range's descriptors and the nodes' liveness (nil
	// when the ranges could not be listed; then HealthError says why).
	Health      *clusterHealthJSON `json:"health"`
	HealthError string             `json:"health_error,omitempty"`
}

// nodeStatsJSON is one node's load. ReadQPS counts the reads its replicas served, WriteQPS the writes
// of the ranges it leads (every replica applies every write; the leader's count is the range's), both
// without the meta range, whose reads are the cluster's own lookups (MetaQPS).
type nodeStatsJSON struct {
	ID                 uint64  `json:"id"`
	Live               bool    `json:"live"`
	State              string  `json:"state"`
	HeartbeatMs        int64   `json:"heartbeat_ms"` // last heartbeat heard (Unix ms, 0 never)
	DiskBytes          uint64  `json:"disk_bytes"`
	BlockCacheHits     uint64  `json:"block_cache_hits"`
	BlockCacheMisses   uint64  `json:"block_cache_misses"`
	CompactionsRunning uint32  `json:"compactions_running"`
	L0Files            uint32  `json:"l0_files"`
	MemtableBytes      uint64  `json:"memtable_bytes"`
	ReadQPS            float64 `json:"read_qps"`
	WriteQPS           float64 `json:"write_qps"`
	MetaQPS            float64 `json:"meta_qps"`
	// Metrics is what the node's /metrics says (nil when it could not be read; then MetricsError
	// says why).
	Metrics      *nodeMetricsJSON `json:"metrics"`
	MetricsError string           `json:"metrics_error,omitempty"`
}

// nodeMetricsJSON is one node's /metrics, summed for the dashboard: its data requests over gRPC
// (to user ranges) and RESP since it started, its process's CPU time and resident memory, its
// store's volume and the range-health gauges (the ranges it answers for: see history.Health).
type nodeMetricsJSON struct {
	GRPC            requestStatsJSON `json:"grpc"`
	RESP            requestStatsJSON `json:"resp"`
	CPUSeconds      float64          `json:"cpu_seconds"`
	ResidentBytes   uint64           `json:"resident_bytes"`
	CapacityBytes   uint64           `json:"capacity_bytes"`
	AvailableBytes  uint64           `json:"available_bytes"`
	UnderReplicated int              `json:"under_replicated"`
	Unavailable     int              `json:"unavailable"`
	Quiesced        int              `json:"quiesced"`
}

// requestStatsJSON is one node's cumulative data requests of one protocol since it started: their
// count, how many did not end OK (typed errors included), and their latency histogram (Buckets[i]
// requests took at most Bounds[i] seconds; Count in all).
type requestStatsJSON struct {
	Total   uint64    `json:"total"`
	NotOK   uint64    `json:"not_ok"`
	Bounds  []float64 `json:"bounds"`
	Buckets []uint64  `json:"buckets"`
	Count   uint64    `json:"count"`
	SumSecs float64   `json:"sum_seconds"`
}

// histogram is rs as the node history reads it.
func (rs requestStatsJSON) histogram() history.Histogram {
	return history.Histogram{Bounds: rs.Bounds, Counts: rs.Buckets, Count: rs.Count, Errors: rs.NotOK}
}

// rangeStatsJSON is one range's load as reported by its leader (reads on followers added).
type rangeStatsJSON struct {
	ID       uint64  `json:"id"`
	Leader   uint64  `json:"leader"` // the node that reported leading it (0 none)
	ReadQPS  float64 `json:"read_qps"`
	WriteQPS float64 `json:"write_qps"`
	Bytes    uint64  `json:"bytes"`
}

// clusterHealthJSON is the state of every range: Target is the number of voters a range should have
// (the replication factor, or the number of nodes when fewer); the lists hold range ids.
// Under-replicated ranges have fewer voters on live nodes than Target, unavailable ones fewer than a
// quorum of their voters (they are under-replicated too); leaderless ones have no leader now.
type clusterHealthJSON struct {
	Ranges          int      `json:"ranges"`
	Target          int      `json:"target"`
	UnderReplicated []uint64 `json:"under_replicated"`
	Unavailable     []uint64 `json:"unavailable"`
	Leaderless      []uint64 `json:"leaderless"`
}

// dataMethods are the gRPC methods whose requests the dashboard charts (the data API, not admin calls
// or heartbeats).
var dataMethods = map[string]bool{"Get": true, "Put": true, "Delete": true, "CompareAndSwap": true, "BatchWrite": true, "Scan": true}

// respDataCommands are the RESP commands the dashboard charts (those that read or write keys).
var respDataCommands = map[string]bool{
	"get": true, "set": true, "setnx": true, "mget": true, "mset": true, "del": true, "unlink": true, "exists": true,
	"type": true, "incr": true, "decr": true, "incrby": true, "decrby": true, "hset": true, "hmset": true, "hget": true,
	"hmget": true, "hgetall": true, "hdel": true, "hlen": true, "hexists": true, "scan": true, "keys": true, "dbsize": true,
}

// metricsFetchTimeout bounds the read of one node's /metrics for /api/stats.
const metricsFetchTimeout = time.Second

// metricsFetcher reads the /metrics of the node whose HTTP address is addr.
type metricsFetcher func(ctx context.Context, addr string) (*nodeMetricsJSON, error)

// buildStats assembles /api/stats (but its health) from the node list, reading every live node's
// /metrics in parallel.
func buildStats(ctx context.Context, nodes []*pb.NodeStatus, fetch metricsFetcher, now time.Time) statsJSON {
	out := statsJSON{TimeMs: now.UnixMilli(), Nodes: make([]nodeStatsJSON, 0, len(nodes)), Ranges: []rangeStatsJSON{}}
	ranges := map[uint64]*rangeStatsJSON{}
	rangeOf := func(id uint64) *rangeStatsJSON {
		r := ranges[id]
		if r == nil {
			r = &rangeStatsJSON{ID: id}
			ranges[id] = r
		}
		return r
	}
	claimed := map[uint64]int64{} // range id -> heartbeat time of the report that set its leader
	var addrs []string            // HTTP address of out.Nodes[i]
	for _, n := range nodes {
		if n == nil {
			continue
		}
		addrs = append(addrs, n.GetDesc().GetHttpAddr())
		ns := nodeStatsJSON{ID: n.GetDesc().GetNodeId(), Live: n.GetLive(), State: n.GetState()}
		if hb := n.GetLastHeartbeatUnixNanos(); hb > 0 {
			ns.HeartbeatMs = hb / 1e6
		}
		if st := n.GetStats(); st != nil {
			ns.DiskBytes = st.GetDiskBytes()
			ns.BlockCacheHits, ns.BlockCacheMisses = st.GetBlockCacheHits(), st.GetBlockCacheMisses()
			ns.CompactionsRunning, ns.L0Files, ns.MemtableBytes = st.GetCompactionsRunning(), st.GetL0Files(), st.GetMemtableBytes()
			for _, rl := range st.GetRanges() {
				meta := rl.GetRangeId() == metaRangeID
				if meta {
					ns.MetaQPS += rl.GetReadQps()
				} else {
					ns.ReadQPS += rl.GetReadQps()
				}
				r := rangeOf(rl.GetRangeId())
				r.ReadQPS += rl.GetReadQps()
				if !rl.GetLeader() {
					continue
				}
				if meta {
					ns.MetaQPS += rl.GetWriteQps()
				} else {
					ns.WriteQPS += rl.GetWriteQps()
				}
				// Two nodes claim a range for a heartbeat or so after its leadership moved: the newer
				// report wins.
				if r.Leader == 0 || ns.HeartbeatMs > claimed[r.ID] {
					r.Leader, r.WriteQPS, r.Bytes = ns.ID, rl.GetWriteQps(), rl.GetBytes()
					claimed[r.ID] = ns.HeartbeatMs
				}
			}
		}
		out.Nodes = append(out.Nodes, ns)
	}
	fetchAllMetrics(ctx, out.Nodes, addrs, fetch)
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].ID < out.Nodes[j].ID })
	for _, r := range ranges {
		out.Ranges = append(out.Ranges, *r)
	}
	sort.Slice(out.Ranges, func(i, j int) bool { return out.Ranges[i].ID < out.Ranges[j].ID })
	return out
}

// fetchAllMetrics reads the live nodes' metrics in parallel (the slowest bounds the answer); addrs[i]
// is the HTTP address of nodes[i].
func fetchAllMetrics(ctx context.Context, nodes []nodeStatsJSON, addrs []string, fetch metricsFetcher) {
	var wg sync.WaitGroup
	for i := range nodes {
		ns, addr := &nodes[i], addrs[i]
		switch {
		case addr == "":
			ns.MetricsError = "HTTP is off on this node"
		case !ns.Live:
			ns.MetricsError = "node is not live"
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := fetch(ctx, addr)
				if err != nil {
					ns.MetricsError = err.Error()
					return
				}
				ns.Metrics = m
			}()
		}
	}
	wg.Wait()
}

// rangeHealth checks every range against the nodes' liveness: the same rules as the nodes'
// shoal_ranges_* gauges (history.Check), over the meta range's list, so a range none of whose voters
// lives is counted too.
func rangeHealth(nodes []*pb.NodeStatus, ranges []*pb.RangeStatus, factor int) *clusterHealthJSON {
	live := map[uint64]bool{}
	members := 0
	for _, n := range nodes {
		if n.GetDecommissioned() {
			continue
		}
		members++
		live[n.GetDesc().GetNodeId()] = n.GetLive()
	}
	h := &clusterHealthJSON{Target: history.Target(factor, members), UnderReplicated: []uint64{}, Unavailable: []uint64{}, Leaderless: []uint64{}}
	for _, r := range ranges {
		d := r.GetDesc()
		if d == nil {
			continue
		}
		h.Ranges++
		var voters []uint64
		for _, rep := range d.GetReplicas() {
			if !rep.GetLearner() {
				voters = append(voters, rep.GetNodeId())
			}
		}
		switch history.Check(voters, func(id uint64) bool { return live[id] }, h.Target) {
		case history.Unavailable:
			h.Unavailable = append(h.Unavailable, d.GetRangeId())
			h.UnderReplicated = append(h.UnderReplicated, d.GetRangeId())
		case history.UnderReplicated:
			h.UnderReplicated = append(h.UnderReplicated, d.GetRangeId())
		}
		if r.GetLeaderNodeId() == 0 {
			h.Leaderless = append(h.Leaderless, d.GetRangeId())
		}
	}
	for _, l := range [][]uint64{h.UnderReplicated, h.Unavailable, h.Leaderless} {
		slices.Sort(l)
	}
	return h
}

// metricsClient reads other nodes' /metrics and /api/history: cluster traffic never goes through an
// HTTP proxy.
var metricsClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}

// fetchNodeMetrics reads the node's /metrics (open, like on every node).
func fetchNodeMetrics(ctx context.Context, addr string) (*nodeMetricsJSON, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read /metrics of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read /metrics of %s: %s", addr, resp.Status)
	}
	return parseNodeMetrics(io.LimitReader(resp.Body, 16<<20))
}

// familyT is one metric family of a Prometheus exposition.
type familyT = dto.MetricFamily

// parseNodeMetrics sums a Prometheus text exposition (the one metrics.go produces) for the dashboard.
func parseNodeMetrics(r io.Reader) (*nodeMetricsJSON, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	out := summarizeRequests(fams)
	if out.err != nil {
		return nil, out.err
	}
	value := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.GetMetric()) == 0 {
			return 0
		}
		m := f.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		}
		return m.GetUntyped().GetValue()
	}
	return &nodeMetricsJSON{GRPC: out.GRPC, RESP: out.RESP,
		CPUSeconds: value("process_cpu_seconds_total"), ResidentBytes: uint64(value("process_resident_memory_bytes")),
		CapacityBytes: uint64(value("shoal_store_capacity_bytes")), AvailableBytes: uint64(value("shoal_store_available_bytes")),
		UnderReplicated: int(value("shoal_ranges_underreplicated")), Unavailable: int(value("shoal_ranges_unavailable")),
		Quiesced: int(value("shoal_replicas_quiesced"))}, nil
}

// requestSums is the data requests of one node, gRPC and RESP.
type requestSums struct {
	GRPC, RESP requestStatsJSON
	err        error
}

// summarizeRequests sums the data requests' counters and latency histograms of a node's metric
// families: gRPC data methods on user ranges (not the meta range's lookups), RESP commands on keys.
func summarizeRequests(fams map[string]*familyT) requestSums {
	label := func(m *dto.Metric, name string) (string, bool) {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue(), true
			}
		}
		return "", false
	}
	grpcData := func(m *dto.Metric) bool {
		method, _ := label(m, "method")
		if ks, _ := label(m, "keyspace"); ks == keyspaceMeta {
			return false
		}
		return dataMethods[method[strings.LastIndexByte(method, '/')+1:]]
	}
	respData := func(m *dto.Metric) bool {
		c, _ := label(m, "command")
		return respDataCommands[c]
	}
	out := requestSums{GRPC: requestStatsJSON{Bounds: []float64{}, Buckets: []uint64{}}, RESP: requestStatsJSON{Bounds: []float64{}, Buckets: []uint64{}}}
	count := func(rs *requestStatsJSON, name string, isData func(*dto.Metric) bool, ok func(*dto.Metric) bool) {
		for _, m := range fams[name].GetMetric() {
			if !isData(m) {
				continue
			}
			v := uint64(m.GetCounter().GetValue())
			rs.Total += v
			if !ok(m) {
				rs.NotOK += v
			}
		}
	}
	histogram := func(rs *requestStatsJSON, name string, isData func(*dto.Metric) bool) error {
		for _, m := range fams[name].GetMetric() {
			h := m.GetHistogram()
			if !isData(m) || h == nil {
				continue
			}
			rs.Count += h.GetSampleCount()
			rs.SumSecs += h.GetSampleSum()
			i := 0
			for _, b := range h.GetBucket() {
				if math.IsInf(b.GetUpperBound(), 0) {
					continue // Count is the +Inf bucket
				}
				if i == len(rs.Bounds) {
					rs.Bounds = append(rs.Bounds, b.GetUpperBound())
					rs.Buckets = append(rs.Buckets, 0)
				}
				if rs.Bounds[i] != b.GetUpperBound() {
					return fmt.Errorf("parse /metrics: %s has different buckets by label", name)
				}
				rs.Buckets[i] += b.GetCumulativeCount()
				i++
			}
		}
		return nil
	}
	count(&out.GRPC, "shoal_grpc_requests_total", grpcData, func(m *dto.Metric) bool {
		code, _ := label(m, "code")
		e, ok := label(m, "error")
		return code == "OK" && (!ok || e == noError)
	})
	count(&out.RESP, "shoal_resp_commands_total", respData, func(m *dto.Metric) bool {
		o, _ := label(m, "outcome")
		return o == "ok"
	})
	if err := histogram(&out.GRPC, "shoal_grpc_request_duration_seconds", grpcData); err != nil {
		out.err = err
	}
	if err := histogram(&out.RESP, "shoal_resp_command_duration_seconds", respData); err != nil {
		out.err = err
	}
	return out
}

// ---------- /api/history: the last hour ----------

// historyJSON is one node's history: its points, oldest first (see history.Point), one every
// IntervalS seconds, whose latency buckets have the upper bounds GRPCBounds and RESPBounds (seconds).
// In the cluster's answer, a node whose history could not be read has no points and an Error.
type historyJSON struct {
	NodeID     uint64          `json:"node_id"`
	IntervalS  float64         `json:"interval_s"`
	GRPCBounds []float64       `json:"grpc_bounds"`
	RESPBounds []float64       `json:"resp_bounds"`
	Points     []history.Point `json:"points"`
	Error      string          `json:"error,omitempty"`
}

// clusterHistoryJSON is /api/history: every node's history, by node id.
type clusterHistoryJSON struct {
	TimeMs int64         `json:"time_ms"`
	Nodes  []historyJSON `json:"nodes"`
}

// historyFetchTimeout bounds the read of one node's history.
const historyFetchTimeout = 3 * time.Second

// historyFetcher reads the history of the node whose HTTP address is addr.
type historyFetcher func(ctx context.Context, addr string) (historyJSON, error)

// localHistory is this node's history after since (Unix ms).
func localHistory(rec *history.Recorder, id uint64, since int64) historyJSON {
	g, r := rec.LatencyBounds()
	if g == nil {
		g = []float64{}
	}
	if r == nil {
		r = []float64{}
	}
	return historyJSON{NodeID: id, IntervalS: rec.Interval().Seconds(), GRPCBounds: g, RESPBounds: r, Points: rec.Since(since)}
}

// fetchHistory reads another node's history with the caller's credentials (the nodes of a cluster
// share its token).
func fetchHistory(ctx context.Context, addr, auth string, since int64) (historyJSON, error) {
	ctx, cancel := context.WithTimeout(ctx, historyFetchTimeout)
	defer cancel()
	var h historyJSON
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/history?node=local&since="+strconv.FormatInt(since, 10), nil)
	if err != nil {
		return h, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return h, fmt.Errorf("read the history of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return h, fmt.Errorf("read the history of %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e errorJSON
		json.Unmarshal(body, &e)
		return h, fmt.Errorf("read the history of %s: %s %s", addr, resp.Status, e.Error)
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return h, fmt.Errorf("read the history of %s: %w", addr, err)
	}
	return h, nil
}

// buildHistory assembles the cluster's history: this node's own (self) and every other live node's,
// read in parallel.
func buildHistory(ctx context.Context, nodes []*pb.NodeStatus, self historyJSON, fetch historyFetcher, now time.Time) clusterHistoryJSON {
	out := clusterHistoryJSON{TimeMs: now.UnixMilli(), Nodes: []historyJSON{self}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range nodes {
		id, addr := n.GetDesc().GetNodeId(), n.GetDesc().GetHttpAddr()
		if id == self.NodeID || n.GetDecommissioned() {
			continue
		}
		h := historyJSON{NodeID: id, IntervalS: self.IntervalS, GRPCBounds: []float64{}, RESPBounds: []float64{}, Points: []history.Point{}}
		switch {
		case addr == "":
			h.Error = "HTTP is off on this node"
		case !n.GetLive():
			h.Error = "node is not live"
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := fetch(ctx, addr)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					h.Error = err.Error()
				} else {
					h = got
					h.NodeID = id
				}
				out.Nodes = append(out.Nodes, h)
			}()
			continue
		}
		mu.Lock()
		out.Nodes = append(out.Nodes, h)
		mu.Unlock()
	}
	wg.Wait()
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].NodeID < out.Nodes[j].NodeID })
	return out
}

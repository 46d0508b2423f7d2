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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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
}

// apiTimeout bounds one /api/ call into the node (a cluster without quorum must not hang the page).
const apiTimeout = 5 * time.Second

// errorJSON is the body of every HTTP error answer.
type errorJSON struct {
	Error string `json:"error"`
}

// httpDeps is what the HTTP handler needs from the running node.
type httpDeps struct {
	status  clusterStatus
	ready   *atomic.Bool
	metrics http.Handler
	auth    tokenChecker
}

// newHTTPHandler builds the node's HTTP surface:
//
//	/healthz       200 "ok" once the node serves, 503 before (open)
//	/metrics       Prometheus exposition (open)
//	/api/nodes     node list, JSON (token)
//	/api/ranges    range list, JSON (token)
//	/api/decisions the autopilot's decision log, JSON (token)
//	/api/stats     load of every node for the dashboard's charts, JSON (token; see statsJSON)
//	/debug/pprof/  Go profiling (token)
//	/              the dashboard page (open; it sends the token, if the user gives one, to /api/)
//	/assets/       the dashboard's script and style sheet (open)
func newHTTPHandler(d httpDeps) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !d.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", d.metrics)
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
	mux.HandleFunc("GET /api/stats", d.api(func(ctx context.Context, w http.ResponseWriter) {
		resp, err := d.status.Nodes(ctx, &pb.NodesRequest{})
		if msg, code := apiError(err, resp.GetError()); code != 0 {
			writeJSON(w, code, errorJSON{Error: "node stats: " + msg})
			return
		}
		writeJSON(w, http.StatusOK, buildStats(ctx, resp.GetNodes(), fetchNodeMetrics, time.Now()))
	}))
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

// api wraps a JSON API handler: it answers 503 until the node serves and bounds the call by
// apiTimeout.
func (d *httpDeps) api(h func(ctx context.Context, w http.ResponseWriter)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !d.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, errorJSON{Error: "node is not serving yet"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
		defer cancel()
		h(ctx, w)
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
// disk, block cache) plus, read from each live node's /metrics, that node's cumulative gRPC data
// request counts and latency histogram. Everything is cumulative or a rate measured by the node; the
// dashboard turns counters into rates and quantiles from the difference between two polls.
type statsJSON struct {
	TimeMs int64            `json:"time_ms"` // when this node answered (Unix ms)
	Nodes  []nodeStatsJSON  `json:"nodes"`
	Ranges []rangeStatsJSON `json:"ranges"`
}

// nodeStatsJSON is one node's load. ReadQPS counts the reads its replicas served, WriteQPS the writes
// of the ranges it leads (every replica applies every write; the leader's count is the range's).
type nodeStatsJSON struct {
	ID                 uint64  `json:"id"`
	Live               bool    `json:"live"`
	State              string  `json:"state"`
	HeartbeatMs        int64   `json:"heartbeat_ms"` // last heartbeat heard (Unix ms, 0 never)
	CPUPercent         float64 `json:"cpu_percent"`
	DiskBytes          uint64  `json:"disk_bytes"`
	BlockCacheHits     uint64  `json:"block_cache_hits"`
	BlockCacheMisses   uint64  `json:"block_cache_misses"`
	CompactionsRunning uint32  `json:"compactions_running"`
	L0Files            uint32  `json:"l0_files"`
	MemtableBytes      uint64  `json:"memtable_bytes"`
	ReadQPS            float64 `json:"read_qps"`
	WriteQPS           float64 `json:"write_qps"`
	// Requests is the node's gRPC data API counters (nil when its /metrics could not be read; then
	// RequestsError says why).
	Requests      *requestStatsJSON `json:"requests"`
	RequestsError string            `json:"requests_error,omitempty"`
}

// requestStatsJSON is one node's cumulative gRPC data requests (Get, Put, Delete, CompareAndSwap,
// BatchWrite, Scan) since it started: their count, how many did not end OK (typed errors included),
// and their latency histogram (Buckets[i] requests took at most Bounds[i] seconds; Count in all).
type requestStatsJSON struct {
	Total   uint64    `json:"total"`
	NotOK   uint64    `json:"not_ok"`
	Bounds  []float64 `json:"bounds"`
	Buckets []uint64  `json:"buckets"`
	Count   uint64    `json:"count"`
	SumSecs float64   `json:"sum_seconds"`
}

// rangeStatsJSON is one range's load as reported by its leader (reads on followers added).
type rangeStatsJSON struct {
	ID       uint64  `json:"id"`
	Leader   uint64  `json:"leader"` // the node that reported leading it (0 none)
	ReadQPS  float64 `json:"read_qps"`
	WriteQPS float64 `json:"write_qps"`
	Bytes    uint64  `json:"bytes"`
}

// dataMethods are the gRPC methods whose requests the dashboard charts (the data API, not admin calls
// or heartbeats).
var dataMethods = map[string]bool{"Get": true, "Put": true, "Delete": true, "CompareAndSwap": true, "BatchWrite": true, "Scan": true}

// metricsFetchTimeout bounds the read of one node's /metrics for /api/stats.
const metricsFetchTimeout = time.Second

// metricsFetcher reads the request counters of the node whose HTTP address is addr.
type metricsFetcher func(ctx context.Context, addr string) (*requestStatsJSON, error)

// buildStats assembles /api/stats from the node list, reading every live node's /metrics in parallel.
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
			ns.CPUPercent, ns.DiskBytes = st.GetCpuPercent(), st.GetDiskBytes()
			ns.BlockCacheHits, ns.BlockCacheMisses = st.GetBlockCacheHits(), st.GetBlockCacheMisses()
			ns.CompactionsRunning, ns.L0Files, ns.MemtableBytes = st.GetCompactionsRunning(), st.GetL0Files(), st.GetMemtableBytes()
			for _, rl := range st.GetRanges() {
				ns.ReadQPS += rl.GetReadQps()
				r := rangeOf(rl.GetRangeId())
				r.ReadQPS += rl.GetReadQps()
				if !rl.GetLeader() {
					continue
				}
				ns.WriteQPS += rl.GetWriteQps()
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
	// Read the live nodes' counters in parallel (the slowest bounds the answer).
	var wg sync.WaitGroup
	for i := range out.Nodes {
		ns, addr := &out.Nodes[i], addrs[i]
		switch {
		case addr == "":
			ns.RequestsError = "HTTP is off on this node"
		case !ns.Live:
			ns.RequestsError = "node is not live"
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs, err := fetch(ctx, addr)
				if err != nil {
					ns.RequestsError = err.Error()
					return
				}
				ns.Requests = rs
			}()
		}
	}
	wg.Wait()
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].ID < out.Nodes[j].ID })
	for _, r := range ranges {
		out.Ranges = append(out.Ranges, *r)
	}
	sort.Slice(out.Ranges, func(i, j int) bool { return out.Ranges[i].ID < out.Ranges[j].ID })
	return out
}

// metricsClient reads other nodes' /metrics: cluster traffic never goes through an HTTP proxy.
var metricsClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}

// fetchNodeMetrics reads the node's /metrics (open, like on every node) and sums its data requests.
func fetchNodeMetrics(ctx context.Context, addr string) (*requestStatsJSON, error) {
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
	return parseRequestStats(io.LimitReader(resp.Body, 16<<20))
}

// parseRequestStats sums the data methods' counters and latency histograms of a Prometheus text
// exposition (the one metrics.go produces).
func parseRequestStats(r io.Reader) (*requestStatsJSON, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	out := &requestStatsJSON{Bounds: []float64{}, Buckets: []uint64{}}
	isData := func(m *dto.Metric) bool {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" {
				i := strings.LastIndexByte(l.GetValue(), '/')
				return dataMethods[l.GetValue()[i+1:]]
			}
		}
		return false
	}
	for _, m := range fams["shoal_grpc_requests_total"].GetMetric() {
		if !isData(m) {
			continue
		}
		v := uint64(m.GetCounter().GetValue())
		out.Total += v
		for _, l := range m.GetLabel() {
			if l.GetName() == "code" && l.GetValue() != "OK" {
				out.NotOK += v
			}
		}
	}
	for _, m := range fams["shoal_grpc_request_duration_seconds"].GetMetric() {
		if !isData(m) || m.GetHistogram() == nil {
			continue
		}
		h := m.GetHistogram()
		out.Count += h.GetSampleCount()
		out.SumSecs += h.GetSampleSum()
		i := 0
		for _, b := range h.GetBucket() {
			if math.IsInf(b.GetUpperBound(), 0) {
				continue // Count is the +Inf bucket
			}
			if i == len(out.Bounds) {
				out.Bounds = append(out.Bounds, b.GetUpperBound())
				out.Buckets = append(out.Buckets, 0)
			}
			if out.Bounds[i] != b.GetUpperBound() {
				return nil, fmt.Errorf("parse /metrics: methods have different latency buckets")
			}
			out.Buckets[i] += b.GetCumulativeCount()
			i++
		}
	}
	return out, nil
}

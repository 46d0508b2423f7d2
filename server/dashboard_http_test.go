package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/node/history"
	"github.com/shoaldb/shoal/pb"
)

func TestDashboardAssets(t *testing.T) {
	srv := newTestHTTP(t, testToken, fakeStatus{}, true)
	for _, tc := range []struct {
		path, ctype string
		code        int
	}{
		{"/", "text/html", 200},
		{"/assets/dashboard.js", "text/javascript", 200},
		{"/assets/dashboard.css", "text/css", 200},
		{"/assets/index.html", "", 404},
		{"/assets/nope.js", "", 404},
		{"/assets/", "", 404},
	} {
		code, h, body := get(t, srv.URL+tc.path, "")
		if code != tc.code {
			t.Errorf("GET %s = %d, want %d", tc.path, code, tc.code)
			continue
		}
		if code != 200 {
			continue
		}
		if !strings.HasPrefix(h.Get("Content-Type"), tc.ctype) || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s headers: %v", tc.path, h)
		}
		// Nothing is loaded from elsewhere (the SVG namespace URI in the script is a name, not a load).
		for _, bad := range []string{"https://", "//cdn", "<script>", "@import"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s contains %q", tc.path, bad)
			}
		}
	}
}

func TestHTTPStatsAuth(t *testing.T) {
	srv := newTestHTTP(t, testToken, fakeStatus{}, true)
	if code, _, _ := get(t, srv.URL+"/api/stats", ""); code != 401 {
		t.Fatalf("/api/stats without token = %d, want 401", code)
	}
	code, _, body := get(t, srv.URL+"/api/stats", "Bearer "+testToken)
	var st statsJSON
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Nodes) != 2 {
		t.Fatalf("/api/stats = %d %s", code, body)
	}
	// The fake nodes' HTTP addresses do not answer: the figures say so instead of failing the call.
	if st.Nodes[0].ID != 1 || st.Nodes[0].Metrics != nil || st.Nodes[0].MetricsError == "" || st.Nodes[1].MetricsError != "node is not live" {
		t.Fatalf("/api/stats nodes = %+v", st.Nodes)
	}
	// Range 2's one voter is live, but two nodes could hold one each.
	if h := st.Health; h == nil || h.Ranges != 1 || h.Target != 2 || !slices.Equal(h.UnderReplicated, []uint64{2}) || len(h.Unavailable) != 0 {
		t.Fatalf("/api/stats health = %+v (%s)", st.Health, st.HealthError)
	}
	errSrv := newTestHTTP(t, "", fakeStatus{err: errors.New("boom")}, true)
	if code, _, body := get(t, errSrv.URL+"/api/stats", ""); code != 502 || !strings.Contains(body, "boom") {
		t.Fatalf("/api/stats on a failing node = %d %s", code, body)
	}
}

func TestBuildStats(t *testing.T) {
	now := time.Unix(1000, 0)
	nodes := []*pb.NodeStatus{
		{Desc: &pb.NodeDescriptor{NodeId: 2, HttpAddr: "h2"}, Live: true, State: "live", LastHeartbeatUnixNanos: now.UnixNano(),
			Stats: &pb.NodeStats{DiskBytes: 20, BlockCacheHits: 9, BlockCacheMisses: 1, Ranges: []*pb.RangeLoad{
				{RangeId: 1, Leader: true, ReadQps: 100, WriteQps: 2}, // the meta range: the cluster's own lookups
				{RangeId: 5, Leader: true, ReadQps: 10, WriteQps: 4, Bytes: 500},
				{RangeId: 6, ReadQps: 1, WriteQps: 7}, // a follower: its writes are the leader's
			}}},
		{Desc: &pb.NodeDescriptor{NodeId: 1, HttpAddr: "h1"}, Live: true, State: "live", LastHeartbeatUnixNanos: now.Add(-time.Second).UnixNano(),
			Stats: &pb.NodeStats{Ranges: []*pb.RangeLoad{
				{RangeId: 6, Leader: true, ReadQps: 3, WriteQps: 7, Bytes: 600},
				{RangeId: 5, Leader: true, ReadQps: 0, WriteQps: 99, Bytes: 1}, // a stale claim: node 2 heard later
			}}},
		{Desc: &pb.NodeDescriptor{NodeId: 3}, State: "dead"},
	}
	fetch := func(_ context.Context, addr string) (*nodeMetricsJSON, error) {
		if addr == "h1" {
			return nil, errors.New("unreachable")
		}
		return &nodeMetricsJSON{GRPC: requestStatsJSON{Total: 3, Count: 3}}, nil
	}
	st := buildStats(context.Background(), nodes, fetch, now)
	if st.TimeMs != 1000000 || len(st.Nodes) != 3 || st.Nodes[0].ID != 1 || st.Nodes[2].ID != 3 {
		t.Fatalf("stats = %+v", st)
	}
	n1, n2, n3 := st.Nodes[0], st.Nodes[1], st.Nodes[2]
	if n2.ReadQPS != 11 || n2.WriteQPS != 4 || n2.MetaQPS != 102 || n2.DiskBytes != 20 || n2.BlockCacheHits != 9 || n2.Metrics == nil || n2.Metrics.GRPC.Total != 3 {
		t.Errorf("node 2 = %+v", n2)
	}
	if n1.MetricsError != "unreachable" || n1.Metrics != nil || n3.MetricsError == "" {
		t.Errorf("nodes 1, 3 = %+v %+v", n1, n3)
	}
	if len(st.Ranges) != 3 {
		t.Fatalf("ranges = %+v", st.Ranges)
	}
	if r := st.Ranges[0]; r.ID != 1 || r.Leader != 2 || r.ReadQPS != 100 {
		t.Errorf("meta range = %+v", r)
	}
	if r := st.Ranges[1]; r.ID != 5 || r.Leader != 2 || r.ReadQPS != 10 || r.WriteQPS != 4 || r.Bytes != 500 {
		t.Errorf("range 5 = %+v", r)
	}
	if r := st.Ranges[2]; r.ID != 6 || r.Leader != 1 || r.ReadQPS != 4 || r.WriteQPS != 7 || r.Bytes != 600 {
		t.Errorf("range 6 = %+v", r)
	}
}

func TestRangeHealth(t *testing.T) {
	node := func(id uint64, live, decommissioned bool) *pb.NodeStatus {
		return &pb.NodeStatus{Desc: &pb.NodeDescriptor{NodeId: id}, Live: live, Decommissioned: decommissioned}
	}
	rng := func(id, leader uint64, voters ...uint64) *pb.RangeStatus {
		d := &pb.RangeDescriptor{RangeId: id}
		for _, v := range voters {
			d.Replicas = append(d.Replicas, &pb.ReplicaDescriptor{NodeId: v})
		}
		d.Replicas = append(d.Replicas, &pb.ReplicaDescriptor{NodeId: 9, Learner: true}) // learners do not count
		return &pb.RangeStatus{Desc: d, LeaderNodeId: leader}
	}
	nodes := []*pb.NodeStatus{node(1, true, false), node(2, true, false), node(3, false, false), node(4, true, false), node(5, false, true)}
	ranges := []*pb.RangeStatus{
		rng(1, 1, 1, 2, 4), // healthy
		rng(2, 1, 1, 2, 3), // a voter on a dead node
		rng(3, 0, 3, 5, 1), // no quorum, no leader
		rng(4, 0, 3, 5),    // no voter alive: counted all the same
		rng(5, 2, 1, 2, 4, 3),
	}
	h := rangeHealth(nodes, ranges, 3)
	if h.Ranges != 5 || h.Target != 3 || !slices.Equal(h.UnderReplicated, []uint64{2, 3, 4}) || !slices.Equal(h.Unavailable, []uint64{3, 4}) ||
		!slices.Equal(h.Leaderless, []uint64{3, 4}) {
		t.Fatalf("health = %+v", h)
	}
	// A cluster of one node: its ranges have all the voters they can have.
	if h := rangeHealth(nodes[:1], []*pb.RangeStatus{rng(1, 1, 1)}, 3); h.Target != 1 || len(h.UnderReplicated) != 0 {
		t.Fatalf("one node: %+v", h)
	}
}

// TestParseNodeMetrics reads the exposition this package's own metrics produce.
func TestParseNodeMetrics(t *testing.T) {
	m := newMetrics()
	call := func(method string, req any, resp any, err error, secs float64, n int) {
		for i := 0; i < n; i++ {
			m.unaryInterceptor(context.Background(), req, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) {
				return resp, err
			})
		}
		// The interceptor measured next to nothing; put the wanted latencies in the histogram.
		for i := 0; i < n; i++ {
			m.latency.WithLabelValues(method, requestKeyspace(req)).Observe(secs)
		}
	}
	user := &pb.RequestHeader{RangeId: 5}
	call("/shoal.Shoal/Get", &pb.GetRequest{Header: user}, &pb.GetResponse{}, nil, 0.0001, 10) // 100µs: second bucket
	call("/shoal.Shoal/Put", &pb.PutRequest{}, &pb.PutResponse{}, nil, 0.002, 5)
	call("/shoal.Shoal/Put", &pb.PutRequest{}, &pb.PutResponse{Error: &pb.Error{Code: pb.ErrorCode_NOT_LEADER}}, nil, 0.002, 1)
	call("/shoal.Shoal/Scan", &pb.ScanRequest{Header: &pb.RequestHeader{RangeId: metaRangeID}}, &pb.ScanResponse{}, nil, 1, 50) // internal
	call("/shoal.Shoal/Heartbeat", &pb.HeartbeatRequest{}, &pb.HeartbeatResponse{}, nil, 1, 100)                                // not a data method
	m.observeRESP("get", 30*time.Microsecond, nil)
	m.observeRESP("set", 30*time.Microsecond, errors.New("OOM"))
	m.observeRESP("ping", time.Second, nil) // not a data command
	rec := httptest.NewRecorder()
	m.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	exposition := rec.Body.String()
	nm, err := parseNodeMetrics(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	rs := nm.GRPC
	// 16 data requests to user ranges; each was observed twice (by the interceptor and above).
	if rs.Total != 16 || rs.NotOK != 1 || rs.Count != 32 || len(rs.Bounds) != 18 || len(rs.Buckets) != 18 {
		t.Fatalf("gRPC request stats = %+v", rs)
	}
	if rs.Bounds[0] != 50e-6 || rs.Buckets[1] < 10 || rs.Buckets[len(rs.Buckets)-1] != 32 {
		t.Fatalf("histogram = %v %v", rs.Bounds, rs.Buckets)
	}
	if r := nm.RESP; r.Total != 2 || r.NotOK != 1 || r.Count != 2 || r.Buckets[0] != 0 || r.Buckets[1] != 2 {
		t.Fatalf("RESP request stats = %+v", r)
	}
	// A young test process may have used less CPU than the kernel counts (10 ms ticks): the figure is
	// there, maybe 0.
	if runtime.GOOS == "linux" && (!strings.Contains(exposition, "\nprocess_cpu_seconds_total ") || nm.CPUSeconds < 0 || nm.ResidentBytes == 0) {
		t.Errorf("process figures: %+v", nm)
	}
	if _, err := json.Marshal(nm); err != nil {
		t.Fatalf("node metrics do not encode: %v", err)
	}
	g, r := m.requestHistograms()
	if g.Count != 32 || r.Count != 2 || len(g.Bounds) != 18 {
		t.Fatalf("history's histograms: %+v %+v", g, r)
	}
}

func TestRequestMetricLabels(t *testing.T) {
	m := newMetrics()
	call := func(method string, req, resp any, err error) {
		m.unaryInterceptor(context.Background(), req, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) {
			return resp, err
		})
	}
	call("/shoal.Shoal/Put", &pb.PutRequest{}, &pb.PutResponse{Error: &pb.Error{Code: pb.ErrorCode_NOT_LEADER}}, nil)
	call("/shoal.Shoal/Put", &pb.PutRequest{}, nil, status.Error(codes.Unavailable, "gone"))
	call("/shoal.Shoal/Scan", &pb.ScanRequest{Header: &pb.RequestHeader{RangeId: metaRangeID}}, &pb.ScanResponse{}, nil)
	call("/shoal.Shoal/Heartbeat", &pb.HeartbeatRequest{}, &pb.HeartbeatResponse{}, nil)
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"method", "/shoal.Shoal/Put", "code", "OK", "error", "NOT_LEADER", "keyspace", "user"}, 1},
		{[]string{"method", "/shoal.Shoal/Put", "code", "Unavailable", "error", "none", "keyspace", "user"}, 1},
		{[]string{"method", "/shoal.Shoal/Scan", "code", "OK", "error", "none", "keyspace", "meta"}, 1},
		{[]string{"method", "/shoal.Shoal/Heartbeat", "code", "OK", "error", "none", "keyspace", "none"}, 1},
	} {
		if got := metricValue(t, m, "shoal_grpc_requests_total", tc.labels...); got != tc.want {
			t.Errorf("shoal_grpc_requests_total%v = %v, want %v", tc.labels, got, tc.want)
		}
	}
	if got := metricValue(t, m, "shoal_grpc_request_duration_seconds", "method", "/shoal.Shoal/Scan", "keyspace", "meta"); got != 1 {
		t.Errorf("meta scans' latency count = %v", got)
	}
	rec := httptest.NewRecorder()
	m.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !regexp.MustCompile(`(?m)^shoal_build_info\{goversion="go[^"]+",revision="[^"]+",version="[^"]+"\} 1$`).MatchString(body) {
		t.Errorf("no shoal_build_info in\n%s", grepLines(body, "build_info"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// historyStatus is a node that keeps a history.
type historyStatus struct {
	fakeStatus
	rec *history.Recorder
}

func (h historyStatus) History() *history.Recorder { return h.rec }
func (h historyStatus) NodeID() uint64             { return 1 }

func TestHistoryAPI(t *testing.T) {
	rec := history.New(history.Config{Interval: time.Second, Span: time.Minute}, history.Deps{
		Load: func() *pb.NodeStats {
			return &pb.NodeStats{Ranges: []*pb.RangeLoad{{RangeId: 2, Leader: true, ReadQps: 7, WriteQps: 3}}}
		},
		Self: func() uint64 { return 1 },
		Replicas: func() ([]history.Replica, int) {
			return []history.Replica{{RangeID: 2, Voters: []uint64{1, 2, 3}, Leader: true}}, 1
		},
		Live:  func() []uint64 { return []uint64{1, 2} },
		Nodes: func() int { return 3 },
	})
	var r atomic.Bool
	r.Store(true)
	m := newMetrics()
	rec.SetLatencySource(m.requestHistograms) // as server.Run wires a node's history
	m.reg.MustRegister(rec)
	srv := httptest.NewServer(newHTTPHandler(httpDeps{status: historyStatus{rec: rec}, ready: &r, metrics: m.handler(), auth: newTokenChecker(testToken), history: rec}))
	t.Cleanup(srv.Close)

	// The node's latencies reach its history.
	t0 := time.Now().Add(-time.Minute)
	rec.Record(t0)
	m.unaryInterceptor(context.Background(), &pb.GetRequest{}, &grpc.UnaryServerInfo{FullMethod: "/shoal.Shoal/Get"},
		func(context.Context, any) (any, error) { return &pb.GetResponse{}, nil })
	m.observeRESP("get", time.Millisecond, nil)
	rec.Record(t0.Add(time.Second))
	rec.Record(t0.Add(2 * time.Second))

	code, _, body := get(t, srv.URL+"/api/history?node=local", "Bearer "+testToken)
	var local historyJSON
	if code != 200 || json.Unmarshal([]byte(body), &local) != nil {
		t.Fatalf("/api/history?node=local = %d %s", code, body)
	}
	if local.NodeID != 1 || local.IntervalS != 1 || len(local.Points) != 2 || len(local.GRPCBounds) != 18 || len(local.RESPBounds) != 19 {
		t.Fatalf("local history = %+v", local)
	}
	p := local.Points[0]
	if p.ReadQPS != 7 || p.WriteQPS != 3 || p.GRPC == nil || p.GRPC.Count != 1 || p.RESP == nil || p.RESP.Count != 1 || p.UnderReplicated != 1 || p.Quiesced != 0 {
		t.Fatalf("first point = %+v (gRPC %+v, RESP %+v)", p, p.GRPC, p.RESP)
	}
	if local.Points[1].GRPC.Count != 0 {
		t.Errorf("the second interval had no requests: %+v", local.Points[1].GRPC)
	}
	code, _, body = get(t, srv.URL+"/api/history?node=local&since="+strconv.FormatInt(local.Points[0].T, 10), "Bearer "+testToken)
	if json.Unmarshal([]byte(body), &local) != nil || len(local.Points) != 1 {
		t.Fatalf("since the first point: %d %s", code, body)
	}
	if code, _, _ := get(t, srv.URL+"/api/history", ""); code != 401 {
		t.Fatalf("/api/history without the token = %d", code)
	}
	// The cluster's: this node's own, the dead node's error.
	code, _, body = get(t, srv.URL+"/api/history", "Bearer "+testToken)
	var all clusterHistoryJSON
	if code != 200 || json.Unmarshal([]byte(body), &all) != nil || len(all.Nodes) != 2 {
		t.Fatalf("/api/history = %d %s", code, body)
	}
	if all.Nodes[0].NodeID != 1 || len(all.Nodes[0].Points) != 2 || all.Nodes[1].NodeID != 2 || all.Nodes[1].Error != "node is not live" {
		t.Fatalf("/api/history nodes = %+v", all.Nodes)
	}
	// The health gauges are on /metrics.
	_, _, body = get(t, srv.URL+"/metrics", "")
	if !strings.Contains(body, "\nshoal_ranges_underreplicated 1\n") || !strings.Contains(body, "\nshoal_ranges_unavailable 0\n") {
		t.Errorf("/metrics health gauges:\n%s", grepLines(body, "shoal_ranges"))
	}
	// A node without a history says so.
	plain := newTestHTTP(t, "", fakeStatus{}, true)
	if code, _, _ := get(t, plain.URL+"/api/history", ""); code != 404 {
		t.Errorf("/api/history of a node without one = %d", code)
	}
}

func TestBuildHistory(t *testing.T) {
	nodes := []*pb.NodeStatus{
		{Desc: &pb.NodeDescriptor{NodeId: 3, HttpAddr: "h3"}, Live: true},
		{Desc: &pb.NodeDescriptor{NodeId: 1, HttpAddr: "h1"}, Live: true},
		{Desc: &pb.NodeDescriptor{NodeId: 2, HttpAddr: "h2"}, Live: true},
		{Desc: &pb.NodeDescriptor{NodeId: 4}, Live: true},
		{Desc: &pb.NodeDescriptor{NodeId: 5, HttpAddr: "h5"}, Decommissioned: true},
	}
	self := historyJSON{NodeID: 1, IntervalS: 5, Points: []history.Point{{T: 1}}}
	fetch := func(_ context.Context, addr string) (historyJSON, error) {
		if addr == "h3" {
			return historyJSON{}, errors.New("refused")
		}
		if addr == "h1" {
			t.Error("this node's own history was fetched over HTTP")
		}
		return historyJSON{NodeID: 99, IntervalS: 5, Points: []history.Point{{T: 1}, {T: 2}}}, nil
	}
	h := buildHistory(context.Background(), nodes, self, fetch, time.Unix(7, 0))
	if h.TimeMs != 7000 || len(h.Nodes) != 4 {
		t.Fatalf("history = %+v", h)
	}
	if h.Nodes[0].NodeID != 1 || len(h.Nodes[0].Points) != 1 || h.Nodes[1].NodeID != 2 || len(h.Nodes[1].Points) != 2 ||
		h.Nodes[2].NodeID != 3 || h.Nodes[2].Error != "refused" || h.Nodes[3].NodeID != 4 || h.Nodes[3].Error != "HTTP is off on this node" {
		t.Fatalf("history nodes = %+v", h.Nodes)
	}
}

func TestFetchHistoryForwardsToken(t *testing.T) {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken || r.URL.Query().Get("node") != "local" || r.URL.Query().Get("since") != "42" {
			writeJSON(w, http.StatusUnauthorized, errorJSON{Error: "who are you"})
			return
		}
		writeJSON(w, http.StatusOK, historyJSON{NodeID: 2, Points: []history.Point{{T: 43}}})
	}))
	defer peer.Close()
	addr := strings.TrimPrefix(peer.URL, "http://")
	h, err := fetchHistory(context.Background(), addr, "Bearer "+testToken, 42)
	if err != nil || h.NodeID != 2 || len(h.Points) != 1 {
		t.Fatalf("fetch = %+v, %v", h, err)
	}
	if _, err := fetchHistory(context.Background(), addr, "", 42); err == nil || !strings.Contains(err.Error(), "who are you") {
		t.Fatalf("fetch without the token: %v", err)
	}
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	if st.Nodes[0].ID != 1 || st.Nodes[0].Requests != nil || st.Nodes[0].RequestsError == "" || st.Nodes[1].RequestsError != "node is not live" {
		t.Fatalf("/api/stats nodes = %+v", st.Nodes)
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
	fetch := func(_ context.Context, addr string) (*requestStatsJSON, error) {
		if addr == "h1" {
			return nil, errors.New("unreachable")
		}
		return &requestStatsJSON{Total: 3, Count: 3}, nil
	}
	st := buildStats(context.Background(), nodes, fetch, now)
	if st.TimeMs != 1000000 || len(st.Nodes) != 3 || st.Nodes[0].ID != 1 || st.Nodes[2].ID != 3 {
		t.Fatalf("stats = %+v", st)
	}
	n1, n2, n3 := st.Nodes[0], st.Nodes[1], st.Nodes[2]
	if n2.ReadQPS != 11 || n2.WriteQPS != 4 || n2.DiskBytes != 20 || n2.BlockCacheHits != 9 || n2.Requests == nil || n2.Requests.Total != 3 {
		t.Errorf("node 2 = %+v", n2)
	}
	if n1.RequestsError != "unreachable" || n1.Requests != nil || n3.RequestsError == "" {
		t.Errorf("nodes 1, 3 = %+v %+v", n1, n3)
	}
	if len(st.Ranges) != 2 {
		t.Fatalf("ranges = %+v", st.Ranges)
	}
	if r := st.Ranges[0]; r.ID != 5 || r.Leader != 2 || r.ReadQPS != 10 || r.WriteQPS != 4 || r.Bytes != 500 {
		t.Errorf("range 5 = %+v", r)
	}
	if r := st.Ranges[1]; r.ID != 6 || r.Leader != 1 || r.ReadQPS != 4 || r.WriteQPS != 7 || r.Bytes != 600 {
		t.Errorf("range 6 = %+v", r)
	}
}

// TestParseRequestStats reads the exposition this package's own metrics produce.
func TestParseRequestStats(t *testing.T) {
	m := newMetrics()
	obs := func(method, code string, secs float64, n int) {
		for i := 0; i < n; i++ {
			m.latency.WithLabelValues(method).Observe(secs)
			m.requests.WithLabelValues(method, code).Inc()
		}
	}
	obs("/shoal.Shoal/Get", "OK", 0.0001, 10) // 100µs: second bucket
	obs("/shoal.Shoal/Put", "OK", 0.002, 5)   // 2ms
	obs("/shoal.Shoal/Put", "NOT_LEADER", 0.002, 1)
	obs("/shoal.Shoal/Heartbeat", "OK", 1, 100) // not a data method
	rec := httptest.NewRecorder()
	m.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	rs, err := parseRequestStats(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Total != 16 || rs.NotOK != 1 || rs.Count != 16 || len(rs.Bounds) != 18 || len(rs.Buckets) != 18 {
		t.Fatalf("request stats = %+v", rs)
	}
	if rs.Bounds[0] != 50e-6 || rs.Buckets[0] != 0 || rs.Buckets[1] != 10 || rs.Buckets[len(rs.Buckets)-1] != 16 {
		t.Fatalf("histogram = %v %v", rs.Bounds, rs.Buckets)
	}
	if _, err := json.Marshal(rs); err != nil {
		t.Fatalf("request stats do not encode: %v", err)
	}
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/apijson"
)

// fakeStatus serves a fixed cluster view, or fails.
type fakeStatus struct {
	err  error
	perr *pb.Error
}

func (f fakeStatus) Decisions(context.Context, *pb.DecisionsRequest) (*pb.DecisionsResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &pb.DecisionsResponse{Error: f.perr, EntriesJson: []byte(`[{"id":1,"policy":"replicate"}]`)}, nil
}

func (f fakeStatus) Nodes(context.Context, *pb.NodesRequest) (*pb.NodesResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &pb.NodesResponse{Error: f.perr, Nodes: []*pb.NodeStatus{
		{Desc: &pb.NodeDescriptor{NodeId: 2, Addr: "127.0.0.1:2", HttpAddr: "127.0.0.1:82"}, State: "dead"},
		{Desc: &pb.NodeDescriptor{NodeId: 1, Addr: "127.0.0.1:1", HttpAddr: "127.0.0.1:81"}, Live: true, State: "live", RangeCount: 3, LeaderCount: 2},
	}}, nil
}

func (f fakeStatus) Ranges(context.Context, *pb.RangesRequest) (*pb.RangesResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &pb.RangesResponse{Error: f.perr, Ranges: []*pb.RangeStatus{
		{Desc: &pb.RangeDescriptor{RangeId: 2, StartKey: []byte("a"), Generation: 4,
			Replicas: []*pb.ReplicaDescriptor{{NodeId: 1}, {NodeId: 2, Learner: true}}}, LeaderNodeId: 1},
	}}, nil
}

func (f fakeStatus) Jobs(context.Context, *pb.JobsRequest) (*pb.JobsResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &pb.JobsResponse{Error: f.perr, Jobs: []*pb.JobState{
		{Job: &pb.ScanJob{Name: "orders-count", Start: []byte("o/"), End: []byte{'o', 0xff}, EveryMs: 3600_000, DeadlineMs: 600_000, Count: true},
			Running: &pb.JobRun{DueUnixMs: 7200_000, StartedUnixMs: 7200_250, ProgressUnixMs: 7201_000, NodeId: 2, Rows: 40, RangesDone: 1, RangesTotal: 3},
			Last: []*pb.JobRun{
				{DueUnixMs: 3600_000, FinishedUnixMs: 4300_000, Error: "range 7: unavailable"},
				{DueUnixMs: 0, FinishedUnixMs: 100_000, OnTime: true, Rows: 120},
			},
			NextDueUnixMs: 10800_000, Runs: 3, Late: 2, Refused: 1, Admission: "admitted"},
		{Job: &pb.ScanJob{Name: "export", Start: []byte("a"), End: []byte("b"), EveryMs: 1000, DeadlineMs: 500, OutputDir: "/x"}},
	}}, nil
}

func newTestHTTP(t *testing.T, token string, status clusterStatus, ready bool) *httptest.Server {
	t.Helper()
	var r atomic.Bool
	r.Store(ready)
	m := newMetrics()
	srv := httptest.NewServer(newHTTPHandler(httpDeps{status: status, ready: &r, metrics: m.handler(), auth: newTokenChecker(token)}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, auth string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestHTTPHealthz(t *testing.T) {
	notReady := newTestHTTP(t, "", fakeStatus{}, false)
	if code, _, _ := get(t, notReady.URL+"/healthz", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz before ready = %d, want 503", code)
	}
	if code, _, _ := get(t, notReady.URL+"/api/nodes", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("api before ready = %d, want 503", code)
	}
	ready := newTestHTTP(t, "", fakeStatus{}, true)
	if code, _, body := get(t, ready.URL+"/healthz", ""); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("healthz = %d %q, want 200 ok", code, body)
	}
	// A node draining for a stop is not ready: load balancers stop sending it clients first.
	var r atomic.Bool
	r.Store(true)
	stopping := httptest.NewServer(newHTTPHandler(httpDeps{status: fakeStatus{}, ready: &r, stopping: func() bool { return true },
		metrics: newMetrics().handler(), auth: newTokenChecker("")}))
	defer stopping.Close()
	if code, _, body := get(t, stopping.URL+"/healthz", ""); code != http.StatusServiceUnavailable || strings.TrimSpace(body) != "stopping" {
		t.Fatalf("healthz while stopping = %d %q, want 503 stopping", code, body)
	}
	// A node whose replicas still catch up after its start is not ready either: a rolling restart
	// stops the next node only once this one holds what its ranges committed while it was down.
	var catching atomic.Bool
	catching.Store(true)
	starting := httptest.NewServer(newHTTPHandler(httpDeps{status: fakeStatus{}, ready: &r, catchingUp: catching.Load,
		metrics: newMetrics().handler(), auth: newTokenChecker("")}))
	defer starting.Close()
	if code, _, body := get(t, starting.URL+"/healthz", ""); code != http.StatusServiceUnavailable || strings.TrimSpace(body) != "catching up" {
		t.Fatalf("healthz while catching up = %d %q, want 503 catching up", code, body)
	}
	catching.Store(false)
	if code, _, body := get(t, starting.URL+"/healthz", ""); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("healthz once caught up = %d %q, want 200 ok", code, body)
	}
}

func TestHTTPAPI(t *testing.T) {
	srv := newTestHTTP(t, "", fakeStatus{}, true)
	code, h, body := get(t, srv.URL+"/api/nodes", "")
	if code != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("/api/nodes = %d %s", code, h.Get("Content-Type"))
	}
	var nodes []map[string]any
	if err := json.Unmarshal([]byte(body), &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0]["id"] != 1.0 || nodes[0]["live"] != true || nodes[0]["http_addr"] != "127.0.0.1:81" ||
		nodes[0]["leader_count"] != 2.0 || nodes[1]["state"] != "dead" {
		t.Fatalf("/api/nodes = %s", body)
	}
	code, _, body = get(t, srv.URL+"/api/ranges", "")
	var ranges []map[string]any
	if err := json.Unmarshal([]byte(body), &ranges); code != 200 || err != nil {
		t.Fatalf("/api/ranges = %d %s (%v)", code, body, err)
	}
	if len(ranges) != 1 || ranges[0]["start"] != "61" || ranges[0]["end"] != "" || ranges[0]["leader"] != 1.0 ||
		len(ranges[0]["replicas"].([]any)) != 1 || len(ranges[0]["learners"].([]any)) != 1 {
		t.Fatalf("/api/ranges = %s", body)
	}
	if code, _, _ := get(t, srv.URL+"/api/nope", ""); code != 404 {
		t.Fatalf("/api/nope = %d, want 404", code)
	}
	if code, _, _ := get(t, srv.URL+"/nope", ""); code != 404 {
		t.Fatalf("/nope = %d, want 404", code)
	}
	code, h, body = get(t, srv.URL+"/", "")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(body, "/api/ranges") {
		t.Fatalf("/ = %d %s", code, h.Get("Content-Type"))
	}
	if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Fatal("the dashboard must load no external resources")
	}
}

// /api/jobs lists the jobs by name with their counts, the run going on and the last outcomes.
func TestHTTPJobs(t *testing.T) {
	srv := newTestHTTP(t, "", fakeStatus{}, true)
	code, h, body := get(t, srv.URL+"/api/jobs", "")
	var jobs []apijson.JobJSON
	if err := json.Unmarshal([]byte(body), &jobs); code != 200 || h.Get("Content-Type") != "application/json" || err != nil {
		t.Fatalf("/api/jobs = %d %s (%v)", code, body, err)
	}
	if len(jobs) != 2 || jobs[0].Name != "export" || jobs[0].Action != "export" || jobs[0].Running != nil || jobs[0].Last == nil {
		t.Fatalf("/api/jobs = %s", body)
	}
	j := jobs[1]
	if j.Every != "1h0m0s" || j.Deadline != "10m0s" || j.Action != "count" || j.Span.Start != "o/" || j.Span.EndEncoding != apijson.Base64 ||
		j.NextDue != "1970-01-01T03:00:00Z" || j.Runs != 3 || j.OnTime != 1 || j.Late != 2 || j.LastFailed != 1 || j.Refused != 1 || j.Admission != "admitted" {
		t.Fatalf("orders-count = %+v", j)
	}
	r := j.Running
	if r == nil || r.Outcome != "running" || r.Progress != "1970-01-01T02:00:01Z" || r.Node != 2 || r.RangesDone != 1 || r.RangesTotal != 3 || r.Finished != "" {
		t.Fatalf("running = %+v", r)
	}
	if len(j.Last) != 2 || j.Last[0].Outcome != "failed" || j.Last[0].Error == "" || j.Last[1].Outcome != "on time" || j.Last[1].Rows != 120 {
		t.Fatalf("last = %+v", j.Last)
	}
}

func TestHTTPAPIErrors(t *testing.T) {
	for _, tc := range []struct {
		status clusterStatus
		code   int
		msg    string
	}{
		{fakeStatus{err: errors.New("boom")}, http.StatusBadGateway, "boom"},
		{fakeStatus{perr: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "no quorum"}}, http.StatusServiceUnavailable, "no quorum"},
	} {
		srv := newTestHTTP(t, "", tc.status, true)
		for _, path := range []string{"/api/nodes", "/api/ranges", "/api/jobs"} {
			code, h, body := get(t, srv.URL+path, "")
			var e errorJSON
			if code != tc.code || h.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, tc.msg) {
				t.Fatalf("%s = %d %s, want %d with %q", path, code, body, tc.code, tc.msg)
			}
		}
	}
}

func TestHTTPAuth(t *testing.T) {
	srv := newTestHTTP(t, testToken, fakeStatus{}, true)
	for _, tc := range []struct {
		path, auth string
		code       int
	}{
		{"/healthz", "", 200},
		{"/metrics", "", 200},
		{"/", "", 200},
		{"/api/nodes", "", 401},
		{"/api/ranges", "Bearer nope", 401},
		{"/api/ranges", testToken, 401},
		{"/api/nope", "", 401},
		{"/debug/pprof/", "", 401},
		{"/api/jobs", "", 401},
		{"/api/nodes", "Bearer " + testToken, 200},
		{"/api/jobs", "Bearer " + testToken, 200},
		{"/api/ranges", "Bearer " + testToken, 200},
		{"/debug/pprof/", "Bearer " + testToken, 200},
	} {
		code, h, body := get(t, srv.URL+tc.path, tc.auth)
		if code != tc.code {
			t.Errorf("GET %s with %q = %d, want %d", tc.path, tc.auth, code, tc.code)
		}
		if code == 401 {
			if strings.Contains(body, testToken[:6]) {
				t.Errorf("401 body echoes the token: %s", body)
			}
			if h.Get("WWW-Authenticate") == "" || h.Get("Content-Type") != "application/json" {
				t.Errorf("401 headers: %v", h)
			}
		}
	}
}

func TestHTTPMetrics(t *testing.T) {
	srv := newTestHTTP(t, "", fakeStatus{}, true)
	code, _, body := get(t, srv.URL+"/metrics", "")
	if code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics = %d, missing Go collector:\n%.500s", code, body)
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server"
	"github.com/shoaldb/shoal/server/apijson"
)

// /api/jobs on a running node: empty at first, then the job `shoal job add` stored, with its first
// run's outcome once it ran (its first run is due when it is added).
func TestRunJobsAPI(t *testing.T) {
	cfg := server.Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Node: node.Config{DataDir: filepath.Join(t.TempDir(), "n1"), Bootstrap: true}}
	n := startNode(t, cfg)
	defer n.stop(t)
	jobsOf := func() []apijson.JobJSON {
		t.Helper()
		code, body := httpGet(t, "http://"+n.http+"/api/jobs")
		var jobs []apijson.JobJSON
		if err := json.Unmarshal([]byte(body), &jobs); code != 200 || err != nil {
			t.Fatalf("/api/jobs = %d %s (%v)", code, body, err)
		}
		return jobs
	}
	if jobs := jobsOf(); len(jobs) != 0 {
		t.Fatalf("/api/jobs before any job = %+v", jobs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Addrs: []string{n.grpc}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 5 {
		if err := c.Put(ctx, fmt.Appendf(nil, "orders/%d", i), []byte("x")); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	job := &pb.ScanJob{Name: "orders-count", Start: []byte("orders/"), End: []byte("orders0"), EveryMs: 3600_000, DeadlineMs: 600_000, Count: true}
	if _, _, err := c.AddJob(ctx, job); err != nil {
		t.Fatalf("AddJob: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		jobs := jobsOf()
		if len(jobs) != 1 || jobs[0].Name != job.Name || jobs[0].Span.Start != "orders/" || jobs[0].Every != "1h0m0s" || jobs[0].Action != "count" {
			t.Fatalf("/api/jobs after AddJob = %+v", jobs)
		}
		if j := jobs[0]; j.Runs > 0 {
			if j.OnTime != 1 || len(j.Last) != 1 || j.Last[0].Outcome != "on time" || j.Last[0].Rows != 5 || j.Running != nil || j.NextDue == "" {
				t.Fatalf("/api/jobs after the first run = %+v", j)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run of the job in /api/jobs after 20s: %+v", jobs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

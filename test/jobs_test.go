package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/jobs"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/table"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestScanJobs runs count jobs on a 3-node cluster: a table's rows are counted; runs every 2 s count
// the rows of a prefix on time; bad jobs are refused with InvalidArgument; when the node leading the meta range dies the job
// runs again from another node; once removed it runs no more.
func TestScanJobs(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{
		// Progress often, and a silent run abandoned soon, so a dead node's run is replaced in seconds.
		Jobs: jobs.Config{Tick: 100 * time.Millisecond, ProgressEvery: 200 * time.Millisecond, StaleAfter: time.Second},
	}})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	const rows = 137
	for i := 0; i < rows; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("jobs/%04d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"job", "jobs0", "other/1"} { // around the prefix: not counted
		if err := cl.Put(ctx, []byte(k), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// A split inside the prefix: a run reads two ranges.
	if _, _, err := cl.Split(ctx, []byte("jobs/0070")); err != nil {
		t.Fatalf("split: %v", err)
	}

	for _, bad := range []*pb.ScanJob{
		{Name: "t", Table: "no_such_table", EveryMs: 2000, DeadlineMs: 1000, Count: true},
		{Name: "e", Start: []byte("b"), End: []byte("a"), EveryMs: 2000, DeadlineMs: 1000, Count: true},
		{Name: "n", Start: []byte("a"), EveryMs: -2000, DeadlineMs: 1000, Count: true},
	} {
		if _, _, err := cl.AddJob(ctx, bad); !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("AddJob(%v) = %v, want INVALID_ARGUMENT", bad, err)
		}
	}

	// A table's rows: the span comes from its descriptor.
	cat := table.NewCatalog(cl)
	cols, err := table.ParseColumns("id:int64,name:string")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Create(ctx, table.NewDescriptor("jobrows", cols, table.ParseKeyList("id"))); err != nil {
		t.Fatal(err)
	}
	tb, err := cat.Open(ctx, "jobrows")
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 9; i++ {
		if err := tb.Put(ctx, table.Row{"id": i, "name": "r"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := cl.AddJob(ctx, &pb.ScanJob{Name: "table-rows", Table: "jobrows", EveryMs: 1000, DeadlineMs: 500, Count: true}); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 10*time.Second, "a run of the table job", func() bool {
		jobs, err := cl.Jobs(ctx, "table-rows")
		if err != nil || len(jobs) != 1 || len(jobs[0].Last) == 0 {
			return false
		}
		if r := jobs[0].Last[0]; r.Error != "" || r.Rows != 9 {
			t.Fatalf("table job run: %v, want 9 rows", r)
		}
		return true
	})
	if found, err := cl.RemoveJob(ctx, "table-rows"); err != nil || !found {
		t.Fatalf("RemoveJob = %v, %v", found, err)
	}

	job := &pb.ScanJob{Name: "count-jobs", Start: []byte("jobs/"), End: []byte("jobs0"), EveryMs: 2000, DeadlineMs: 1000, Count: true}
	if _, warning, err := cl.AddJob(ctx, job); err != nil || warning != "" {
		t.Fatalf("AddJob = %q, %v", warning, err)
	}
	state := func() *pb.JobState {
		jobs, err := cl.Jobs(ctx, job.Name)
		if err != nil || len(jobs) != 1 {
			t.Logf("Jobs: %v, %v", jobs, err)
			return nil
		}
		return jobs[0]
	}
	// goodRuns counts the finished runs that counted every row on time, and those by node.
	goodRuns := func(st *pb.JobState) (n int, by map[uint64]int) {
		by = map[uint64]int{}
		for _, r := range st.GetLast() {
			if r.Error == "" && r.OnTime && r.Rows == rows {
				n++
				by[r.NodeId]++
			} else if r.Error == "" && r.Rows != rows {
				t.Fatalf("a run counted %d rows, want %d: %v", r.Rows, rows, r)
			}
		}
		return n, by
	}
	testcluster.WaitFor(t, 12*time.Second, "two runs on time with the right count", func() bool {
		n, _ := goodRuns(state())
		return n >= 2
	})

	// The meta range must keep a quorum when its leader dies.
	testcluster.WaitFor(t, 20*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	metaLeader := -1
	for i, n := range c.Nodes {
		if r := n.Node.Store().Replica(replica.MetaRangeID); r != nil && r.IsLeader() {
			metaLeader = i
		}
	}
	if metaLeader < 0 {
		t.Fatal("no node leads the meta range")
	}
	deadID := c.Nodes[metaLeader].Node.NodeID()
	if _, by := goodRuns(state()); by[deadID] == 0 {
		t.Fatalf("the runs so far were not on the meta range's leader (node %d): %v", deadID, by)
	}
	if err := c.KillWait(metaLeader); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 20*time.Second, "a run from another node after the meta leader died", func() bool {
		st := state()
		for _, r := range st.GetLast() {
			if r.NodeId != deadID && r.Error == "" && r.Rows == rows {
				return true
			}
		}
		return false
	})

	if found, err := cl.RemoveJob(ctx, job.Name); err != nil || !found {
		t.Fatalf("RemoveJob = %v, %v", found, err)
	}
	finished := func() (n uint64) {
		for i, nd := range c.Nodes {
			if c.Alive(i) {
				s := nd.Node.Metrics().Jobs
				n += s.OnTime + s.Late + s.Failed
			}
		}
		return n
	}
	// A run going on when the job was removed may still finish: let it.
	time.Sleep(500 * time.Millisecond)
	before := finished()
	time.Sleep(4500 * time.Millisecond) // more than two periods
	if after := finished(); after != before {
		t.Fatalf("%d runs finished after the job was removed", after-before)
	}
	if jobs, err := cl.Jobs(ctx, ""); err != nil || len(jobs) != 0 {
		t.Fatalf("Jobs after remove = %v, %v", jobs, err)
	}
}

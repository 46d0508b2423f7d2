package jobs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// fakeRanges is a meta range and one user range in memory. A scan waits for a token on gate when gate
// is set, so that a test holds a run in the middle of its read.
type fakeRanges struct {
	mu   sync.Mutex
	meta map[string][]byte
	rows []*pb.KeyValue // sorted by key
	gate chan struct{}
}

func newFakeRanges(rows int) *fakeRanges {
	f := &fakeRanges{meta: map[string][]byte{}}
	for i := 0; i < rows; i++ {
		f.rows = append(f.rows, &pb.KeyValue{Key: []byte(fmt.Sprintf("k%04d", i)), Value: []byte("v")})
	}
	return f
}

var oneRange = &pb.RangeDescriptor{RangeId: 2}

func (f *fakeRanges) ScanMeta(_ context.Context, start, end []byte, limit int) ([]*pb.KeyValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for k := range f.meta {
		if k >= string(start) && k < string(end) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []*pb.KeyValue
	for _, k := range keys {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, &pb.KeyValue{Key: []byte(k), Value: f.meta[k]})
	}
	return out, nil
}

func (f *fakeRanges) ProposeMeta(_ context.Context, cmd *pb.Command) (replica.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range cmd.Mutations {
		if m.Delete {
			delete(f.meta, string(m.Key))
		} else {
			f.meta[string(m.Key)] = bytes.Clone(m.Value)
		}
	}
	return replica.Result{}, nil
}

func (f *fakeRanges) LookupRange(context.Context, []byte) (*pb.RangeDescriptor, error) {
	return oneRange, nil
}

func (f *fakeRanges) AllRanges(context.Context) ([]*pb.RangeDescriptor, error) {
	return []*pb.RangeDescriptor{oneRange}, nil
}

func (f *fakeRanges) OnLeader(_ context.Context, _ uint64, local func(*replica.Replica) error,
	_ func(context.Context, pb.ShoalClient) (*pb.Error, error)) error {
	return local(nil)
}

func (f *fakeRanges) Scan(ctx context.Context, req *pb.ScanRequest) (*pb.ScanResponse, error) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp := &pb.ScanResponse{Range: oneRange}
	for _, kv := range f.rows {
		if bytes.Compare(kv.Key, req.Start) < 0 || (len(req.End) > 0 && bytes.Compare(kv.Key, req.End) >= 0) {
			continue
		}
		if len(resp.Kvs) == int(req.Limit) {
			resp.Truncated = true
			break
		}
		resp.Kvs = append(resp.Kvs, kv)
	}
	return resp, nil
}

// fakeClock is the scheduler's clock, moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

type harness struct {
	t     *testing.T
	svc   *Service
	f     *fakeRanges
	clock *fakeClock
	leads bool
}

func newHarness(t *testing.T, rows int) *harness {
	h := &harness{t: t, f: newFakeRanges(rows), clock: &fakeClock{now: t0}, leads: true}
	h.svc = New(Config{PageRows: 7}, Deps{Ranges: h.f, Now: h.clock.Now})
	h.svc.whoami = func() (uint64, bool) { return 1, h.leads }
	t.Cleanup(h.svc.Stop)
	return h
}

func (h *harness) state(name string) *pb.JobState {
	h.t.Helper()
	jobs, err := h.svc.Jobs(context.Background(), name)
	if err != nil || len(jobs) != 1 {
		h.t.Fatalf("Jobs(%q) = %v, %v", name, jobs, err)
	}
	return jobs[0]
}

// settle waits until no run is going on the node.
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.svc.Stats().Running > 0 {
		if time.Now().After(deadline) {
			h.t.Fatal("a run did not finish")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSchedulerRunsOnceAtATime(t *testing.T) {
	h := newHarness(t, 20)
	ctx := context.Background()
	const every, deadline = 10 * time.Second, 20 * time.Second
	if _, _, err := h.svc.Add(ctx, &pb.ScanJob{Name: "c", Start: []byte("k"), End: []byte("l"), EveryMs: every.Milliseconds(),
		DeadlineMs: deadline.Milliseconds(), Count: true}); err != nil {
		t.Fatal(err)
	}

	// The first run is due at once; hold it in its read.
	h.f.gate = make(chan struct{})
	h.svc.tick(ctx)
	if st := h.state("c"); st.Running == nil || st.Running.DueUnixMs != t0.UnixMilli() || st.Running.NodeId != 1 {
		t.Fatalf("after the first tick: running %v, want a run due at creation on node 1", st.Running)
	}
	// Due again while it still reads: no second run.
	h.clock.Set(t0.Add(every))
	h.svc.tick(ctx)
	h.svc.tick(ctx)
	if n := h.svc.Stats().Running; n != 1 {
		t.Fatalf("%d runs going after the next due time passed, want 1", n)
	}
	close(h.f.gate)
	h.settle()
	st := h.state("c")
	if st.Running != nil || st.Runs != 1 || len(st.Last) != 1 || st.Last[0].Rows != 20 || !st.Last[0].OnTime || st.Last[0].Error != "" {
		t.Fatalf("after the first run: %v", st)
	}

	// The second run was due at t0+every and starts now, on time for its own due time; it finishes
	// 3 periods later, one period after its deadline.
	h.f.gate = make(chan struct{})
	h.svc.tick(ctx)
	if st := h.state("c"); st.Running == nil || st.Running.DueUnixMs != t0.Add(every).UnixMilli() {
		t.Fatalf("second run: %v, want one due at t0+every", st.Running)
	}
	h.clock.Set(t0.Add(4 * every))
	close(h.f.gate)
	h.settle()
	st = h.state("c")
	if last := st.Last[0]; last.OnTime || last.LateMs != every.Milliseconds() || st.Late != 1 {
		t.Fatalf("second run: %v (late %d), want late by %v", last, st.Late, every)
	}
	// Its due times t0+2e and t0+3e passed while it ran: the next run serves t0+4e and skips them.
	h.f.gate = nil
	h.svc.tick(ctx)
	h.settle()
	st = h.state("c")
	if st.Runs != 3 || st.Skipped != 2 || st.Last[0].DueUnixMs != t0.Add(4*every).UnixMilli() || st.NextDueUnixMs != t0.Add(5*every).UnixMilli() {
		t.Fatalf("third run: runs %d skipped %d last %v next %d", st.Runs, st.Skipped, st.Last[0], st.NextDueUnixMs)
	}
	if s := h.svc.Stats(); s.OnTime != 2 || s.Late != 1 || s.Rows != 60 {
		t.Fatalf("stats %+v, want 2 on time, 1 late, 60 rows", s)
	}
}

func TestSchedulerOnlyOnMetaLeader(t *testing.T) {
	h := newHarness(t, 3)
	ctx := context.Background()
	if _, _, err := h.svc.Add(ctx, &pb.ScanJob{Name: "c", Start: []byte("k"), EveryMs: 1000, DeadlineMs: 500, Count: true}); err != nil {
		t.Fatal(err)
	}
	h.leads = false
	h.svc.tick(ctx)
	if st := h.state("c"); st.Running != nil || st.Runs != 0 {
		t.Fatalf("a node that does not lead the meta range ran the job: %v", st)
	}
}

func TestSchedulerTakesOverAbandonedRun(t *testing.T) {
	h := newHarness(t, 3)
	ctx := context.Background()
	if _, _, err := h.svc.Add(ctx, &pb.ScanJob{Name: "c", Start: []byte("k"), EveryMs: 10000, DeadlineMs: 5000, Count: true}); err != nil {
		t.Fatal(err)
	}
	// Node 2 started the first run and then recorded progress 1 s ago: left alone.
	st := h.state("c")
	st.Running = &pb.JobRun{NodeId: 2, DueUnixMs: t0.UnixMilli(), StartedUnixMs: t0.UnixMilli(), ProgressUnixMs: t0.UnixMilli()}
	st.NextDueUnixMs = t0.Add(10 * time.Second).UnixMilli()
	if err := h.svc.saveState(ctx, st); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(t0.Add(10 * time.Second))
	h.f.gate = make(chan struct{})
	defer func() { close(h.f.gate) }()
	// Due again, node 2 fell silent 10 s ago (StaleAfter 5 s): abandoned, the job runs here.
	h.svc.tick(ctx)
	st = h.state("c")
	if st.Running == nil || st.Running.NodeId != 1 || len(st.Last) != 1 || !strings.Contains(st.Last[0].Error, "abandoned") {
		t.Fatalf("after node 2 fell silent: %v", st)
	}
}

func TestRemoveStopsRuns(t *testing.T) {
	h := newHarness(t, 3)
	ctx := context.Background()
	if _, _, err := h.svc.Add(ctx, &pb.ScanJob{Name: "c", Start: []byte("k"), EveryMs: 1000, DeadlineMs: 500, Count: true}); err != nil {
		t.Fatal(err)
	}
	h.f.gate = make(chan struct{})
	h.svc.tick(ctx)
	if found, err := h.svc.Remove(ctx, "c"); err != nil || !found {
		t.Fatalf("Remove = %v, %v", found, err)
	}
	h.settle() // the run going on stopped
	h.f.gate = nil
	h.clock.Set(t0.Add(time.Hour))
	h.svc.tick(ctx)
	h.settle()
	if jobs, err := h.svc.Jobs(ctx, ""); err != nil || len(jobs) != 0 {
		t.Fatalf("after remove: %v, %v", jobs, err)
	}
	if len(h.f.meta) != 0 {
		t.Fatalf("the meta range keeps %d job keys after remove", len(h.f.meta))
	}
	if found, err := h.svc.Remove(ctx, "c"); err != nil || found {
		t.Fatalf("second Remove = %v, %v; want not found", found, err)
	}
}

func TestExport(t *testing.T) {
	h := newHarness(t, 10)
	ctx := context.Background()
	dir := t.TempDir()
	if _, _, err := h.svc.Add(ctx, &pb.ScanJob{Name: "e", Start: []byte("k0002"), End: []byte("k0005"), EveryMs: 1000, DeadlineMs: 500, OutputDir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.svc.Add(ctx, &pb.ScanJob{Name: "e", Start: []byte("k"), EveryMs: 1000, DeadlineMs: 500, Count: true}); err == nil {
		t.Fatal("a second job of the same name was added")
	}
	h.svc.tick(ctx)
	h.settle()
	st := h.state("e")
	if len(st.Last) != 1 || st.Last[0].Rows != 3 || st.Last[0].Output == "" {
		t.Fatalf("export run: %v", st)
	}
	b, err := os.ReadFile(st.Last[0].Output)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"key":"k0002","value":"v"}` + "\n" + `{"key":"k0003","value":"v"}` + "\n" + `{"key":"k0004","value":"v"}` + "\n"
	if string(b) != want {
		t.Fatalf("export file:\n%s\nwant:\n%s", b, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || filepath.Join(dir, entries[0].Name()) != st.Last[0].Output {
		t.Fatalf("export directory holds %v, want only the export", entries)
	}
}

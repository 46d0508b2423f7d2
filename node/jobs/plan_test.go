package jobs

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/prefetch"
)

// TestFollowSharedCopy: two jobs over one span, due a slot apart, on a node whose disk cannot serve
// both runs at their speed: the planner reads the span ahead once, both runs read the copy (the first
// following it as it fills), and the
// copy is released when the later run ends; a third job that fits neither cache nor disk is refused.
func TestFollowSharedCopy(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	slot := time.Second
	in := &prefetch.Instance{Slot: slot, Horizon: 20,
		Nodes: []prefetch.Node{{Bandwidth: []float64{1 << 20}, Cache: 4 << 20}},
		Spans: []prefetch.Span{{ID: "a", Node: 0, Size: 3 << 20}, {ID: "big", Node: 0, Size: 16 << 20}},
		Jobs: []prefetch.Job{
			{Name: "x#0", Span: "a", Start: 6, Duration: 1, Deadline: 3, Period: 10},
			{Name: "y#1", Span: "a", Start: 7, Duration: 1, Deadline: 3, Period: 10},
			{Name: "z#2", Span: "big", Start: 4, Duration: 1, Deadline: 2, Period: 10},
		}}
	sched, err := prefetch.Make(in, prefetch.Planner, prefetch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pa := piece{id: "a", node: 1, size: 3 << 20}
	pjs := []planJob{
		{job: &pb.ScanJob{Name: "x", EveryMs: 10_000}, piece: pa, due: now.Add(6 * slot)},
		{job: &pb.ScanJob{Name: "y", EveryMs: 10_000}, piece: pa, due: now.Add(7 * slot)},
		{job: &pb.ScanJob{Name: "z", EveryMs: 10_000}, piece: piece{id: "big", node: 1, size: 16 << 20}, due: now.Add(4 * slot)},
	}
	ep := follow(in, sched, pjs, now)
	if ep.refused["z"] == "" || ep.refused["x"] != "" || ep.refused["y"] != "" {
		t.Fatalf("refused %v, want z alone", ep.refused)
	}
	x, y := ep.runs[runKey{"x", now.Add(6 * slot).UnixMilli()}], ep.runs[runKey{"y", now.Add(7 * slot).UnixMilli()}]
	if x == nil || y == nil || len(x.pieces) != 1 || len(y.pieces) != 1 {
		t.Fatalf("first runs of x and y not planned: %v %v", x, y)
	}
	key := x.pieces[0].copyKey
	if key == "" || y.pieces[0].copyKey != key {
		t.Fatalf("x reads copy %q, y copy %q: want one shared copy", key, y.pieces[0].copyKey)
	}
	var fetch *fetchPlan
	for i := range ep.fetches {
		if ep.fetches[i].key == key {
			fetch = &ep.fetches[i]
		}
	}
	if fetch == nil {
		t.Fatalf("no prefetch of %q: %+v", key, ep.fetches)
	}
	// x's run follows the copy as it fills: the prefetch may go on up to x's deadline less its run's
	// duration (slot 8), at the lowest rate.
	if fetch.end.After(now.Add(8*slot)) || fetch.rate > 1<<20 {
		t.Fatalf("prefetch %+v: want done a run's duration before x's deadline within the 1 MiB/s budget", fetch)
	}
	if rel := ep.release[key]; rel.Before(now.Add(8 * slot)) {
		t.Fatalf("copy released at %v, before y's run ends", rel.Sub(now))
	}
}

// TestSideCache: a copy is held within the budget, seen as it grows, dropped whole with its prefetch
// stopped, and released at its time.
func TestSideCache(t *testing.T) {
	c := newSideCache(100)
	p := piece{id: "p", start: []byte("a"), end: []byte("m"), node: 1}
	t0 := time.Unix(0, 0)
	stopped := false
	if !c.begin("k", p, t0.Add(time.Minute), func() { stopped = true }) || c.begin("k", p, t0, nil) {
		t.Fatal("begin: want the first only")
	}
	kv := func(k string, n int) *pb.KeyValue { return &pb.KeyValue{Key: []byte(k), Value: make([]byte, n)} }
	if !c.add("k", []*pb.KeyValue{kv("b", 39), kv("z", 500)}, []byte("c")) || c.held() != 40 {
		t.Fatalf("add: held %d, want 40 (the row outside the piece left out)", c.held())
	}
	rows, upTo, done, ok := c.peek("k")
	if !ok || done || len(rows) != 1 || string(upTo) != "c" || stopped || c.held() != 40 {
		t.Fatalf("peek at an incomplete copy: %d rows to %q, done %v ok %v, prefetch stopped %v, held %d", len(rows), upTo, done, ok, stopped, c.held())
	}
	c.drop("k", shortFailed)
	if _, _, _, ok := c.peek("k"); ok || !stopped || c.held() != 0 {
		t.Fatalf("drop: still there %v, prefetch stopped %v, held %d", ok, stopped, c.held())
	}
	if !c.begin("k2", p, t0.Add(time.Minute), nil) || c.add("k2", []*pb.KeyValue{kv("b", 200)}, []byte("c")) {
		t.Fatal("a copy over the budget was kept")
	}
	c.begin("k3", p, t0.Add(time.Minute), nil)
	c.add("k3", []*pb.KeyValue{kv("b", 9)}, []byte("c"))
	c.finish("k3")
	c.drop("k3", shortFailed)
	if _, _, done, ok := c.peek("k3"); !ok || !done {
		t.Fatal("a complete copy was dropped or not seen whole")
	}
	c.sweep(t0.Add(2 * time.Minute))
	if c.held() != 0 {
		t.Fatalf("held %d after the release time", c.held())
	}
}

// TestKeepBegunRefused: a run whose copy was begun keeps its instructions when a new plan refuses
// its job (the new plan, made from now, cannot see the copy): it reads the copy, not nothing.
func TestKeepBegunRefused(t *testing.T) {
	s := New(Config{}, Deps{})
	now := time.Now()
	due := now.Add(time.Second)
	p := piece{id: "p", start: []byte("a"), end: []byte("m"), node: 1}
	rp := &runPlan{pieces: []pieceRead{{piece: p, copyKey: "k"}}}
	cur := &execPlan{runs: map[runKey]*runPlan{{"a", due.UnixMilli()}: rp}, release: map[string]time.Time{"k": due.Add(time.Second)}}
	ep := &execPlan{refused: map[string]string{"a": "no bandwidth"}, runs: map[runKey]*runPlan{}, release: map[string]time.Time{}}
	s.keepBegun(cur, ep, now)
	if len(ep.runs) != 0 {
		t.Fatal("a run whose copy was never begun was carried over")
	}
	s.copies.begin("k", p, due.Add(time.Second), nil)
	s.keepBegun(cur, ep, now)
	if ep.runs[runKey{"a", due.UnixMilli()}] != rp || !ep.release["k"].Equal(due.Add(time.Second)) {
		t.Fatalf("the run reading a begun copy was not carried over its job's refusal: %v", ep.runs)
	}
}

// TestCarriedLeftOut: a run that keeps reading a copy begun under the last plan is left out of the
// next plan, which starts its job at the run after and takes the copy's bytes from the cache budget;
// without it the plan would read the span from disk at once, a read that never happens.
func TestCarriedLeftOut(t *testing.T) {
	s := New(Config{PlanSlot: time.Second}, Deps{})
	now := time.UnixMilli(1_000_000)
	due := now.Add(1500 * time.Millisecond)
	jobs := map[string]*pb.JobState{"a": {Job: &pb.ScanJob{Name: "a", Start: []byte("b"), End: []byte("c"), EveryMs: 10_000,
		DeadlineMs: 2_000, CreatedUnixMs: due.UnixMilli()}, NextDueUnixMs: due.UnixMilli()}}
	all := []*pb.RangeDescriptor{{RangeId: 1, StartKey: []byte("a"), EndKey: []byte("z")}}
	plan := func(carried map[runKey]string) prefetch.Job {
		in := &prefetch.Instance{Slot: time.Second, Horizon: 30}
		s.planJobs(context.Background(), in, jobs, all, map[uint64]int{1: 0}, map[uint64]uint64{1: 1}, map[uint64]int64{1: 1 << 20}, now, carried)
		if len(in.Jobs) != 1 {
			t.Fatalf("%d planner jobs, want 1", len(in.Jobs))
		}
		return in.Jobs[0]
	}
	if j := plan(nil); j.Start != 1 {
		t.Fatalf("first run at slot %d, want 1", j.Start)
	}
	key := fmt.Sprintf("p@%d", due.UnixMilli())
	carried := map[runKey]string{{"a", due.UnixMilli()}: key}
	if j := plan(carried); j.Start != 11 {
		t.Fatalf("with its run carried, the job's first planned run is at slot %d, want 11", j.Start)
	}
	p := piece{id: "p", start: []byte("b"), end: []byte("c"), node: 1, size: 1000}
	s.copies.begin(key, p, due.Add(time.Minute), nil)
	s.copies.add(key, []*pb.KeyValue{{Key: []byte("b"), Value: make([]byte, 99)}}, []byte("b0"))
	// Released a minute after due, 61.5 s from now: the slots of a 30-s window hold it all along.
	if got := s.copies.heldFor(1, now, carried, time.Second, 30); got[0] != 1000 || got[29] != 1000 {
		t.Fatalf("a carried copy filling holds %v of the budget, want its whole size 1000 in every slot", got)
	}
	if got := s.copies.heldFor(1, now, nil, time.Second, 30); slices.Max(got) != 0 {
		t.Fatalf("a copy of a run still to come holds %v of the budget for a plan that reads it, want 0", got)
	}
	// A copy whose run began before now holds its bytes until the slot of its release, then frees them.
	past := fmt.Sprintf("q@%d", now.Add(-time.Second).UnixMilli())
	s.copies.begin(past, piece{id: "q", start: []byte("d"), end: []byte("e"), node: 1, size: 500}, now.Add(2500*time.Millisecond), nil)
	s.copies.add(past, []*pb.KeyValue{{Key: []byte("d"), Value: make([]byte, 199)}}, []byte("e"))
	got := s.copies.heldFor(1, now, nil, time.Second, 30)
	if want := []float64{200, 200, 200, 0}; !slices.Equal(got[:4], want) || slices.Max(got[3:]) != 0 {
		t.Fatalf("a copy released 2.5 s from now holds %v by 1-s slot, want 200 in the first three and none after", got)
	}
}

// TestInFlight: a prefetch still filling is the next plan's base load on its node, at its rate until
// the rest of its piece is read; a complete copy, a run's kept copy and other nodes' copies are not.
func TestInFlight(t *testing.T) {
	c := newSideCache(1 << 20)
	t0 := time.Unix(0, 0)
	p := piece{id: "p", start: []byte("a"), end: []byte("m"), node: 1, size: 1000}
	c.begin("fetch", p, t0.Add(time.Minute), func() {})
	c.setRate("fetch", 200)                                                                   // 1 000 bytes at 200 B/s
	c.add("fetch", []*pb.KeyValue{{Key: []byte("b"), Value: make([]byte, 299)}}, []byte("c")) // 300 read: 3.5 s left
	c.begin("kept", p, t0.Add(time.Minute), nil)                                              // a run's kept copy
	c.begin("done", p, t0.Add(time.Minute), func() {})
	c.setRate("done", 500)
	c.finish("done")
	q := p
	q.node = 2
	c.begin("other", q, t0.Add(time.Minute), func() {})
	c.setRate("other", 100)
	got := c.inFlight(1, time.Second, 10)
	want := []float64{200, 200, 200, 100}
	if len(got) != len(want) {
		t.Fatalf("base load %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("base load %v, want %v", got, want)
		}
	}
	if got := c.inFlight(1, time.Second, 2); len(got) != 2 {
		t.Fatalf("base load %v over a 2-slot horizon", got)
	}
}

// TestSweepKeepsReadCopy: a copy past its release time is kept while a run reads it (its prefetch
// goes on), and released once the run is done; one released unfinished with no reader is counted.
func TestSweepKeepsReadCopy(t *testing.T) {
	c := newSideCache(1 << 20)
	t0 := time.Unix(0, 0)
	p := piece{id: "p", start: []byte("a"), end: []byte("m"), node: 1, size: 1000}
	stopped := false
	c.begin("k", p, t0.Add(time.Second), func() { stopped = true })
	c.add("k", []*pb.KeyValue{{Key: []byte("b"), Value: make([]byte, 99)}}, []byte("c"))
	c.follow("k")
	c.sweep(t0.Add(2 * time.Second))
	if _, _, _, ok := c.peek("k"); !ok || stopped {
		t.Fatalf("a copy a run reads was released under it: held %v, prefetch stopped %v", ok, stopped)
	}
	c.unfollow("k")
	c.sweep(t0.Add(2 * time.Second))
	if _, _, _, ok := c.peek("k"); ok || !stopped {
		t.Fatalf("the copy outlived its last reader: held %v, prefetch stopped %v", ok, stopped)
	}
	if got := c.shortCounts()[shortReleased]; got != 1 {
		t.Fatalf("released unfinished counted %d times, want 1", got)
	}
	c.begin("big", p, t0.Add(time.Minute), nil)
	c.add("big", []*pb.KeyValue{{Key: []byte("b"), Value: make([]byte, 2<<20)}}, []byte("c"))
	if got := c.shortCounts()[shortBudget]; got != 1 {
		t.Fatalf("a copy over the budget counted %d times, want 1", got)
	}
}

// TestInFlightRuns: a run reading from disk (the rest of a piece whose copy was cut short, or a
// planned disk read) is the next plan's base load on its node at its rate until its piece is read.
func TestInFlightRuns(t *testing.T) {
	c := newSideCache(1 << 20)
	c.reading("a@1", 1, 400, 1000) // 2.5 s left
	c.reading("b@1", 2, 100, 1000) // another node's
	got := c.inFlight(1, time.Second, 10)
	want := []float64{400, 400, 200}
	if len(got) != len(want) {
		t.Fatalf("base load %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("base load %v, want %v", got, want)
		}
	}
	c.reading("a@1", 0, 0, 0) // done
	if got := c.inFlight(1, time.Second, 10); len(got) != 0 {
		t.Fatalf("a run done still loads its node: %v", got)
	}
}

// TestReplanOnBudgets: a plan is redone when a node's budget falls below what the plan asks of its
// disk, or rises by a tenth of the disk while jobs are refused, or a node leaves; not when the
// budget moves while the plan still fits it.
func TestReplanOnBudgets(t *testing.T) {
	loads := []NodeLoad{{ID: 1}}
	s := New(Config{DiskBytesPerSec: 10 << 20}, Deps{Cluster: func() []NodeLoad { return loads }})
	ep := &execPlan{refused: map[string]string{}, need: map[uint64]float64{1: 4 << 20}, budgets: map[uint64]float64{1: 10 << 20}}
	t0 := time.Unix(1000, 0)
	if s.budgetsMoved(ep, t0) {
		t.Fatal("re-plans with the budget as planned")
	}
	loads[0].ReadBytes += 5 << 20 // the foreground reads 5 MiB/s: 5 left, above the 4 needed
	if s.budgetsMoved(ep, t0.Add(time.Second)) {
		t.Fatal("re-plans for a budget that still fits the plan")
	}
	loads[0].ReadBytes += 7 << 20 // 7 MiB/s: 3 left
	if !s.budgetsMoved(ep, t0.Add(2*time.Second)) {
		t.Fatal("keeps a plan that no longer fits its node's budget")
	}
	ep.refused["j"] = "no room"
	ep.budgets[1] = 3 << 20
	if !s.budgetsMoved(ep, t0.Add(3*time.Second)) { // the foreground stopped: 10 left
		t.Fatal("keeps refusing jobs with a tenth of the disk more to plan them in")
	}
	loads = nil
	if !s.budgetsMoved(&execPlan{budgets: map[uint64]float64{1: 1}}, t0.Add(4*time.Second)) {
		t.Fatal("keeps a plan for a node that left")
	}
}

// TestNodeNeeds: what a plan asks of a node's disk is its highest slot, base load included.
func TestNodeNeeds(t *testing.T) {
	in := &prefetch.Instance{Slot: time.Second, Horizon: 6, Nodes: []prefetch.Node{{Base: []float64{3, 1}}, {}}}
	sched := prefetch.Schedule{Transfers: []prefetch.Transfer{
		{Node: 0, Start: 1, End: 3, Rate: 4}, {Node: 0, Start: 2, End: 4, Rate: 2}, {Node: 1, Start: 0, End: 9, Rate: 1},
	}}
	got := nodeNeeds(in, sched, []NodeLoad{{ID: 7}, {ID: 9}})
	if got[7] != 6 || got[9] != 1 {
		t.Fatalf("needs %v, want 7: 6 (slot 2: 4+2), 9: 1", got)
	}
}

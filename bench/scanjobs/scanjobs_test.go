package scanjobs

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/storage"
)

// TestMix: the mix is the seed's, spans in range, deadlines and offsets in their bounds.
func TestMix(t *testing.T) {
	o := Options{}.withDefaults()
	a, b := mix(o), mix(o)
	if len(a) != o.Jobs {
		t.Fatalf("%d jobs, want %d", len(a), o.Jobs)
	}
	spans := map[int]int{}
	for i, j := range a {
		if j != b[i] {
			t.Fatalf("the same seed drew %v and %v", j, b[i])
		}
		if j.span < 0 || j.span >= o.Spans || j.deadline < o.MinDeadline || j.deadline > o.MaxDeadline || j.offset < 0 || j.offset > o.Stagger {
			t.Fatalf("job out of bounds: %+v", j)
		}
		spans[j.span]++
	}
	if spans[0] < 2 {
		t.Fatalf("the most popular span has %d jobs: %v", spans[0], spans)
	}
}

// TestBlockRoom: the nodes' block cache leaves the intended room for blocks beside the memtables
// Pebble charges to it, and that room is a small part of the rows a node holds, so the jobs' reads
// reach the disk.
func TestBlockRoom(t *testing.T) {
	for _, room := range []int64{256 << 10, 2 << 20, 8 << 20} {
		o := Options{BlockRoomBytes: room}.withDefaults()
		st := storage.Options{CacheBytes: o.cacheBytes(), MemTableBytes: memTableBytes}
		if got := st.BlockRoomBytes(); got != o.BlockRoomBytes {
			t.Fatalf("room %d: a %d-byte cache leaves %d for blocks", o.BlockRoomBytes, o.cacheBytes(), got)
		}
	}
	o := Options{}.withDefaults()
	perNode := int64(o.Spans*o.SpanRows*o.ValueBytes) * int64(min(3, o.Nodes)) / int64(o.Nodes)
	if o.BlockRoomBytes*8 > perNode {
		t.Fatalf("default room %d against %d bytes of rows a node: reads would not reach the disk", o.BlockRoomBytes, perNode)
	}
}

// TestRunSmall runs a small scenario with demand reads and the planner: every arm measures the
// foreground and the disks, and counts the runs due in its window.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("two clusters, about a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := Options{Spans: 2, SpanRows: 500, Jobs: 3, Period: 4 * time.Second, MinDeadline: time.Second, MaxDeadline: 2 * time.Second,
		Stagger: time.Second, Measure: 8 * time.Second, BlockRoomBytes: 256 << 10, Rate: 50, Clients: 2, Strategies: []string{"demand-reads", "planner"},
		Progress: func(s string) { t.Log(s) }}
	rep, err := Run(ctx, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rep.Arms {
		t.Logf("%+v", a)
		if a.RunsDue == 0 || a.Ops == 0 || a.ReadBytes < 1<<20 || a.PeakReadBytesPerSec <= 0 {
			t.Fatalf("%s: an empty measure: %+v", a.Strategy, a)
		}
		// The runs read spans led by every node: their blocks count as the jobs' on each, forwarded or not.
		if a.JobBlockBytes == 0 || a.JobBlockBytes >= a.ServedBlockBytes || a.FgHitRatio < 0 || a.FgHitRatio > 1 {
			t.Fatalf("%s: the jobs' block lookups %d of %d, foreground hit ratio %v", a.Strategy, a.JobBlockBytes, a.ServedBlockBytes, a.FgHitRatio)
		}
		if a.LeadersMoved != 0 {
			t.Fatalf("%s: %d spans' leaders moved from where the set-up put them: %v", a.Strategy, a.LeadersMoved, a.SpanLeaders)
		}
		for i, mb := range a.NodeBlockRoomMB { // the cache less at most both memtables, at least one
			if room := mb * 1e6; room <= 0 || room > float64(rep.CacheBytes-memTableBytes)*1.01 {
				t.Fatalf("%s: node %d has %.2f MB of room for blocks in a %d-byte cache", a.Strategy, i+1, mb, rep.CacheBytes)
			}
		}
	}
	if rep.Arms[1].CopyBytes == 0 {
		t.Fatalf("the planner's runs read nothing from copies: %+v", rep.Arms[1])
	}
}

// TestFgHitRatio: an arm's foreground hit ratio is its cached block bytes over its looked-up ones,
// both less the jobs'; without lookups none is set.
func TestFgHitRatio(t *testing.T) {
	a := Arm{Strategy: "planner", Ops: 500, ServedBlockBytes: 9000, ServedInCacheBytes: 6000, JobBlockBytes: 5000, JobInCacheBytes: 4500}
	a.fgHitRatio()
	if a.FgHitRatio != 0.375 || a.FgBlockBytesPerOp != 8 {
		t.Fatalf("fg hit ratio %v, %v bytes an operation: want 0.375 and 8", a.FgHitRatio, a.FgBlockBytesPerOp)
	}
	none := Arm{Strategy: NoJobs}
	none.fgHitRatio()
	if none.FgHitRatio != 0 {
		t.Fatalf("without lookups: %v", none.FgHitRatio)
	}
}

// TestGoRuntime: the garbage collector's CPU and cycles grow with a collection, the live heap is
// read, allocations are counted, and the scheduling latencies' quantiles are ordered.
func TestGoRuntime(t *testing.T) {
	before := goRuntime()
	sink := make([][]byte, 0, 1000)
	for i := 0; i < 1000; i++ {
		sink = append(sink, make([]byte, 1024))
	}
	runtime.GC()
	after := goRuntime()
	if after.gcCPU() <= before.gcCPU() || after.liveMB() <= 0 {
		t.Fatalf("gc CPU %v then %v, live heap %v MB", before.gcCPU(), after.gcCPU(), after.liveMB())
	}
	r := runtimeBetween(before, after, 1)
	if r.GCCycles < 1 || r.AllocMBPerSec < 1 || r.AllocsPerSec < 1000 || r.SchedP999Us < r.SchedP99Us || len(sink) != 1000 {
		t.Fatalf("runtime %+v", r)
	}
}

// TestHistogram: a window's histogram from two readings, its count, sum, max and quantiles.
func TestHistogram(t *testing.T) {
	b := []float64{math.Inf(-1), 0, 1, 2, 4, math.Inf(1)}
	a := &metrics.Float64Histogram{Counts: []uint64{0, 1, 0, 0, 0}, Buckets: b}
	z := &metrics.Float64Histogram{Counts: []uint64{0, 91, 8, 1, 0}, Buckets: b}
	h := histDelta(a, z)
	if h.count() != 99 || h.sum() != 90*0.5+8*1.5+3 || h.max() != 4 || h.quantile(0.5) != 1 || h.quantile(0.95) != 2 || h.quantile(0.99) != 4 || h.above(1) != 9 {
		t.Fatalf("count %d sum %v max %v p50 %v p99 %v above 1: %v", h.count(), h.sum(), h.max(), h.quantile(0.5), h.quantile(0.99), h.above(1))
	}
	if e := histDelta(nil, z); e.count() != 0 || e.quantile(0.99) != 0 {
		t.Fatalf("no reading: %+v", e)
	}
}

// TestPeriodP99: an operation counts in the window's histogram and in its period's, periods with
// none reading 0, and a reset starts the periods again.
func TestPeriodP99(t *testing.T) {
	f := &foreground{hist: hdrhistogram.New(1, 60_000_000, 3), from: time.Now().Add(-25 * time.Second), partLen: 10 * time.Second}
	f.record(2*time.Millisecond, nil)
	near := func(got, want float64) bool { return math.Abs(got-want) < 0.01 } // the histogram's precision
	if got := f.partP99(); len(got) != 3 || got[0] != 0 || got[1] != 0 || !near(got[2], 2) {
		t.Fatalf("period p99s %v, want [0 0 2]", got)
	}
	f.reset()
	f.record(5*time.Millisecond, nil)
	if got := f.partP99(); len(got) != 1 || !near(got[0], 5) {
		t.Fatalf("after a reset: %v, want [5]", got)
	}
	if _, _, _, p99 := f.take(); !near(p99, 5) {
		t.Fatalf("window p99 %v, want 5", p99)
	}
}

// TestPeakLessOther: the peak without compactions is the node-second with the most reads less their
// Other, not the disk's peak second less its own Other.
func TestPeakLessOther(t *testing.T) {
	if p := peakLessOther(nil); p.Node != 0 {
		t.Fatalf("no seconds gave %+v", p)
	}
	secs := []Second{
		{Node: 1, Second: 3, Disk: 4e6, Other: 1.5e6}, // the disk's peak, beside a compaction: 2.5e6
		{Node: 2, Second: 5, Disk: 3e6, Other: 0},     // the highest without one
		{Node: 3, Second: 3, Disk: 2e6, Other: 0.1e6},
	}
	if p := peakLessOther(secs); p.Node != 2 || p.Second != 5 || p.Disk-p.Other != 3e6 {
		t.Fatalf("peak less other %+v, want node 2's 3e6 at second 5", p)
	}
}

// TestMisplaced: span s belongs on node s mod nodes + 1; an unknown leader (0) is misplaced too.
func TestMisplaced(t *testing.T) {
	got := misplaced([]uint64{1, 2, 3, 1, 1, 0}, 3)
	want := []int{4, 5}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("misplaced %v, want %v", got, want)
	}
}

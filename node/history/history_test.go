package history

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/pb"
)

func TestRingIsBounded(t *testing.T) {
	r := New(Config{Interval: time.Second, Span: 5 * time.Second}, Deps{})
	if r.Capacity() != 5 {
		t.Fatalf("capacity = %d, want 5", r.Capacity())
	}
	t0 := time.Unix(1000, 0)
	r.Record(t0) // the baseline: no point yet
	if _, ok := r.Latest(); ok || len(r.Since(0)) != 0 {
		t.Fatal("the first Record made a point")
	}
	for i := 1; i <= 12; i++ {
		r.Record(t0.Add(time.Duration(i) * time.Second))
	}
	pts := r.Since(0)
	if len(pts) != 5 {
		t.Fatalf("%d points, want 5", len(pts))
	}
	for i, p := range pts {
		if want := t0.Add(time.Duration(8+i) * time.Second).UnixMilli(); p.T != want {
			t.Errorf("point %d at %d, want %d (oldest first, the last five)", i, p.T, want)
		}
	}
	if got := r.Since(t0.Add(10 * time.Second).UnixMilli()); len(got) != 2 {
		t.Errorf("Since(10s) = %d points, want 2", len(got))
	}
	if last, _ := r.Latest(); last.T != t0.Add(12*time.Second).UnixMilli() {
		t.Errorf("latest at %d", last.T)
	}
	r.Record(t0.Add(3 * time.Second)) // the clock went back: dropped
	if last, _ := r.Latest(); last.T != t0.Add(12*time.Second).UnixMilli() {
		t.Errorf("a point from the past replaced the latest: %d", last.T)
	}
}

func TestRecordFigures(t *testing.T) {
	load := &pb.NodeStats{DiskBytes: 4096, BlockCacheHits: 100, BlockCacheMisses: 10, Ranges: []*pb.RangeLoad{
		{RangeId: MetaRangeID, Leader: true, ReadQps: 50, WriteQps: 1}, // the cluster's own lookups
		{RangeId: 2, Leader: true, ReadQps: 10, WriteQps: 4},
		{RangeId: 3, ReadQps: 3, WriteQps: 7}, // a follower: its writes are the leader's
	}}
	bounds := []float64{0.001, 0.01, 0.1}
	grpc := Histogram{Bounds: bounds, Counts: []uint64{0, 0, 0}}
	r := New(Config{}, Deps{Load: func() *pb.NodeStats { return load }, DiskBusy: func() float64 { return 0.25 }, DataDir: t.TempDir()})
	r.SetLatencySource(func() (Histogram, Histogram) { return grpc, Histogram{} })
	t0 := time.Unix(1000, 0)
	r.Record(t0)
	load = &pb.NodeStats{DiskBytes: 8192, BlockCacheHits: 190, BlockCacheMisses: 20, Ranges: load.Ranges}
	// 100 requests: 60 within 1 ms, 39 more within 10 ms, one slower; 2 failed.
	grpc = Histogram{Bounds: bounds, Counts: []uint64{60, 99, 100}, Count: 100, Errors: 2}
	r.Record(t0.Add(5 * time.Second))
	p, ok := r.Latest()
	if !ok {
		t.Fatal("no point")
	}
	if p.ReadQPS != 13 || p.WriteQPS != 4 || p.MetaQPS != 51 {
		t.Errorf("qps read %v write %v meta %v, want 13, 4, 51", p.ReadQPS, p.WriteQPS, p.MetaQPS)
	}
	if p.CacheHits != 90 || p.CacheMisses != 10 || p.DiskBytes != 8192 || p.DiskBusy != 0.25 {
		t.Errorf("cache %d/%d disk %d busy %v", p.CacheHits, p.CacheMisses, p.DiskBytes, p.DiskBusy)
	}
	if p.DiskCapacity == 0 || p.DiskAvailable == 0 || p.DiskAvailable > p.DiskCapacity {
		t.Errorf("volume %d available of %d", p.DiskAvailable, p.DiskCapacity)
	}
	if p.MemBytes == 0 {
		t.Errorf("no resident memory")
	}
	if p.GRPC == nil || p.GRPC.Count != 100 || p.GRPC.Errors != 2 || p.RESP != nil {
		t.Fatalf("latency %+v %+v", p.GRPC, p.RESP)
	}
	// The median is inside the first bucket (rank 50 of 60), the 99th percentile at the top of the second.
	if math.Abs(p.GRPC.P50-0.001*50/60) > 1e-9 || math.Abs(p.GRPC.P99-0.01) > 1e-9 {
		t.Errorf("p50 %v p99 %v", p.GRPC.P50, p.GRPC.P99)
	}
	// The next interval counts only its own requests.
	grpc = Histogram{Bounds: bounds, Counts: []uint64{60, 99, 110}, Count: 110, Errors: 2}
	r.Record(t0.Add(10 * time.Second))
	p, _ = r.Latest()
	if p.GRPC.Count != 10 || p.GRPC.Errors != 0 || p.GRPC.Buckets[0] != 0 || p.GRPC.Buckets[2] != 10 || p.GRPC.P50 <= 0.01 {
		t.Errorf("second interval %+v", p.GRPC)
	}
	if g, _ := r.LatencyBounds(); len(g) != 3 {
		t.Errorf("bounds %v", g)
	}
}

func TestQuantile(t *testing.T) {
	b := []float64{1, 2, 4}
	for _, tc := range []struct {
		q     float64
		cum   []uint64
		count uint64
		want  float64
	}{
		{0.5, []uint64{10, 10, 10}, 10, 0.5},
		{0.5, []uint64{0, 10, 10}, 10, 1.5},
		{0.99, []uint64{0, 0, 10}, 10, 2 + 2*0.99},
		{0.99, []uint64{0, 0, 5}, 10, 4}, // beyond the last bound
		{0.5, []uint64{0, 0, 0}, 0, 0},
	} {
		if got := Quantile(tc.q, b, tc.cum, tc.count); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Quantile(%v, %v) = %v, want %v", tc.q, tc.cum, got, tc.want)
		}
	}
}

func TestHealth(t *testing.T) {
	live := map[uint64]bool{1: true, 2: true, 3: false, 4: true}
	reps := []Replica{
		{RangeID: 1, Voters: []uint64{1, 2, 4}, Leader: true},       // healthy
		{RangeID: 2, Voters: []uint64{1, 2, 3}, Leader: true},       // a voter on a dead node
		{RangeID: 3, Voters: []uint64{1, 3, 5}, LeaderNode: 0},      // no quorum, node 1 first live voter
		{RangeID: 4, Voters: []uint64{2, 1, 3}, LeaderNode: 0},      // node 2 answers for it
		{RangeID: 5, Voters: []uint64{1, 2, 3}, LeaderNode: 2},      // led elsewhere
		{RangeID: 6, Voters: []uint64{3, 5, 1}, LeaderNode: 3},      // a dead leader: node 1 answers
		{RangeID: 7, Voters: []uint64{1}, Leader: true},             // one voter of three
		{RangeID: 8, Voters: []uint64{1, 2, 4, 3, 5}, Leader: true}, // 3 of 5 live: a quorum, and the factor
		{RangeID: 9, Voters: []uint64{1, 3, 5, 6, 2}},               // 2 of 5 live: unavailable
	}
	r := New(Config{}, Deps{
		Self:     func() uint64 { return 1 },
		Replicas: func() ([]Replica, int) { return reps, 4 },
		Live: func() []uint64 {
			var out []uint64
			for id, ok := range live {
				if ok {
					out = append(out, id)
				}
			}
			return out
		},
		Nodes: func() int { return 4 },
	})
	h := r.Health()
	// Under-replicated: 2, 3, 6, 7, 9 (7's one voter is its own quorum); unavailable: 3, 6, 9.
	want := Health{Replicas: 9, Leaders: 4, Quiesced: 5, UnderReplicated: 5, Unavailable: 3}
	if h != want {
		t.Errorf("health = %+v, want %+v", h, want)
	}
	if got := Target(3, 1); got != 1 {
		t.Errorf("Target(3, 1) = %d: a one-node cluster's ranges are fully replicated", got)
	}
	if got := Check([]uint64{1}, func(uint64) bool { return true }, Target(3, 1)); got != Healthy {
		t.Errorf("a one-node cluster's range is %v", got)
	}
	if UnderReplicated.String() != "under-replicated" || Unavailable.String() != "unavailable" || Healthy.String() != "ok" {
		t.Error("state names")
	}
}

func TestCollector(t *testing.T) {
	r := New(Config{}, Deps{DataDir: t.TempDir(), Self: func() uint64 { return 1 },
		Replicas: func() ([]Replica, int) { return []Replica{{RangeID: 2, Voters: []uint64{1, 2, 3}, Leader: true}}, 0 },
		Live:     func() []uint64 { return []uint64{1} }, Nodes: func() int { return 3 }})
	reg := prometheus.NewRegistry()
	reg.MustRegister(r)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		got[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
	}
	// One live voter of three: under-replicated and unavailable; the one replica is quiesced.
	for name, want := range map[string]float64{"shoal_ranges_underreplicated": 1, "shoal_ranges_unavailable": 1, "shoal_replicas_quiesced": 1} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if got["shoal_store_capacity_bytes"] <= 0 || got["shoal_store_available_bytes"] <= 0 {
		t.Errorf("store volume gauges: %v", got)
	}
}

package readreplicas

import (
	"math"
	"slices"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/storage"
)

func TestRanksArePermutationsBySeed(t *testing.T) {
	for _, tt := range []struct {
		ranges int
		seed   uint64
	}{{1, 1}, {16, 1}, {16, 2}, {100, 7}} {
		o := Options{Ranges: tt.ranges, Seed: tt.seed}
		got := ranks(o)
		sorted := slices.Sorted(slices.Values(got))
		for i, r := range sorted {
			if r != i {
				t.Fatalf("ranks(%d ranges, seed %d) = %v: not a permutation", tt.ranges, tt.seed, got)
			}
		}
		if again := ranks(o); !slices.Equal(got, again) {
			t.Fatalf("ranks differ for one seed: %v, %v", got, again)
		}
	}
}

func TestArmNames(t *testing.T) {
	for k, want := range map[int]string{-1: "popularity", 0: "uniform-0", 2: "uniform-2"} {
		if got := armName(k); got != want {
			t.Fatalf("armName(%d) = %q, want %q", k, got, want)
		}
	}
}

func TestDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.Nodes != 5 || o.Ranges != 16 || o.Rate != 1000 || o.IOPS != 250 || !slices.Equal(o.Uniform, []int{0, 1, 2}) || o.Zipf <= 1 {
		t.Fatalf("defaults %+v", o)
	}
	if o := (Options{Nodes: 3, Uniform: []int{1}}).withDefaults(); o.Nodes != 3 || !slices.Equal(o.Uniform, []int{1}) {
		t.Fatalf("given values not kept: %+v", o)
	}
}

// TestBlockRoom: the nodes' block cache leaves the intended room for blocks beside the memtables
// Pebble charges to it, and that room is a small part of the replicas a node holds, so reads reach
// the disk.
func TestBlockRoom(t *testing.T) {
	for _, room := range []int64{0, 256 << 10, 2 << 20, 8 << 20} {
		o := Options{BlockRoomBytes: room}.withDefaults()
		st := storage.Options{CacheBytes: o.cacheBytes(), MemTableBytes: memTableBytes}
		if got := st.BlockRoomBytes(); got != o.BlockRoomBytes {
			t.Fatalf("room %d: a %d-byte cache leaves %d for blocks", o.BlockRoomBytes, o.cacheBytes(), got)
		}
	}
	o := Options{}.withDefaults()
	perNode := int64(o.Ranges*o.KeysPerRange*o.ValueBytes*3) / int64(o.Nodes)
	if o.BlockRoomBytes*8 > perNode {
		t.Fatalf("default room %d against %d bytes of replicas a node: reads would not reach the disk", o.BlockRoomBytes, perNode)
	}
}

// TestPlacementSpreadsVotersAndLeaders: on 5 nodes the 16 ranges' voters are three distinct nodes
// each, every node holds 9 or 10 of them and leads 3 or 4 ranges (its leader one of its voters),
// and n1, which leads the meta range, leads 3.
func TestPlacementSpreadsVotersAndLeaders(t *testing.T) {
	voters, leaders := map[uint64]int{}, map[uint64]int{}
	for i := range 16 {
		vs := placedVoters(i, 5)
		if len(vs) != 3 || vs[0] == vs[1] || vs[1] == vs[2] || vs[0] == vs[2] {
			t.Fatalf("range %d: voters %v", i, vs)
		}
		for _, n := range vs {
			voters[n]++
		}
		leaders[vs[0]]++
	}
	for n := uint64(1); n <= 5; n++ {
		if voters[n] < 9 || voters[n] > 10 || leaders[n] < 3 || leaders[n] > 4 {
			t.Fatalf("n%d: %d voters, %d leaders", n, voters[n], leaders[n])
		}
	}
	if leaders[1] != 3 {
		t.Fatalf("n1 leads %d ranges, want 3", leaders[1])
	}
	if vs := placedVoters(0, 2); len(vs) != 2 {
		t.Fatalf("2 nodes: voters %v", vs)
	}
}

// TestDefaultHotSetOutgrowsItsVoters: with the default workload the ranges whose voters are the same
// three nodes get more than 3/5 of the reads, before the hot set moves and after: more than those
// three disks can serve while the five can serve all (the routing may send every other read to the
// other two), so the voters alone cannot carry the load that replicas spread.
func TestDefaultHotSetOutgrowsItsVoters(t *testing.T) {
	o := Options{}.withDefaults()
	for name, perm := range map[string][]int{"before the move": ranks(o), "after": shiftedRanks(o)} {
		if most := busiestVoters(o, perm); most <= 3.0/float64(o.Nodes) {
			t.Fatalf("%s: the most the ranges of three voters get is %.2f of the reads: the voters alone can carry them", name, most)
		}
	}
}

// TestDefaultLoadLeavesHeadroom: the default rate costs the five disks at most 80 % of their
// operations (a backlog built while learners are on their way drains at what is left), yet the
// ranges on the busiest three voters, before the move and after, ask more of those three disks than
// they have: replicas elsewhere are needed.
func TestDefaultLoadLeavesHeadroom(t *testing.T) {
	o := Options{}.withDefaults()
	ops := float64(o.Rate) * opsPerRead
	if all := float64(o.Nodes * o.IOPS); ops > 0.8*all {
		t.Fatalf("%d reads/s cost %.0f of the disks' %.0f operations/s: above 80 %%", o.Rate, ops, all)
	}
	for name, perm := range map[string][]int{"before the move": ranks(o), "after": shiftedRanks(o)} {
		if need := busiestVoters(o, perm) * ops; need <= float64(3*o.IOPS) {
			t.Fatalf("%s: the busiest three voters' ranges cost %.0f operations/s, within their disks' %d", name, need, 3*o.IOPS)
		}
	}
}

// busiestVoters is the largest share of the reads that the ranges on one set of three voters get,
// with the ranks perm.
func busiestVoters(o Options, perm []int) float64 {
	share := zipfShares(o)
	onVoters := map[[3]uint64]float64{}
	for rank, r := range perm {
		onVoters[[3]uint64(sorted(placedVoters(r, o.Nodes)))] += share[rank]
	}
	most := 0.0
	for _, s := range onVoters {
		most = max(most, s)
	}
	return most
}

// zipfShares is each popularity rank's share of the reads, as math/rand/v2's Zipf draws them over
// the ranks with v = 1: in proportion to (1 + rank)^−s.
func zipfShares(o Options) []float64 {
	out := make([]float64, o.Ranges)
	sum := 0.0
	for k := range out {
		out[k] = math.Pow(float64(1+k), -o.Zipf)
		sum += out[k]
	}
	for k := range out {
		out[k] /= sum
	}
	return out
}

// TestRecovery: a backlog's windows count until the last of them, a single second's noise does
// not, a stall (no read completed) does, and a p99 still over at the end is −1.
func TestRecovery(t *testing.T) {
	window := func(fastMs, slowMs int64, slow int) *hdrhistogram.Histogram {
		h := report.NewHist()
		for i := range 1000 {
			v := fastMs
			if i < slow {
				v = slowMs
			}
			_ = h.RecordValue(v * 1000)
		}
		return h
	}
	calm := func(k int) []*hdrhistogram.Histogram {
		var out []*hdrhistogram.Histogram
		for range k {
			out = append(out, window(5, 5, 0))
		}
		return out
	}
	backlog := func(k int) []*hdrhistogram.Histogram {
		var out []*hdrhistogram.Histogram
		for range k {
			out = append(out, window(3000, 3000, 0))
		}
		return out
	}
	noisy := append(calm(20), window(5, 100, 20))
	noisy = append(noisy, calm(20)...)
	stalled := append(calm(10), report.NewHist())
	stalled = append(stalled, calm(20)...)
	for _, tt := range []struct {
		name    string
		windows []*hdrhistogram.Histogram
		want    float64
	}{
		{"calm", calm(30), 0},
		{"a backlog for 12 s", append(backlog(12), calm(30)...), 12},
		{"one noisy second", noisy, 0},
		{"a stall at 10 s", stalled, 11},
		{"over at the end", append(calm(30), backlog(3)...), -1},
	} {
		if got := recovery(tt.windows, 20, recoverySpan); got != tt.want {
			t.Errorf("%s: recovery %v, want %v", tt.name, got, tt.want)
		}
	}
}

package usage

import (
	"container/list"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// lru simulates an LRU cache of size c over a trace and returns its hit ratio after a warm-up.
func lru(trace []int, c int) float64 {
	order := list.New()
	at := map[int]*list.Element{}
	hits, counted := 0, 0
	for i, b := range trace {
		e, ok := at[b]
		if i >= len(trace)/5 {
			counted++
			if ok {
				hits++
			}
		}
		if ok {
			order.MoveToFront(e)
			continue
		}
		at[b] = order.PushFront(b)
		if order.Len() > c {
			old := order.Back()
			order.Remove(old)
			delete(at, old.Value.(int))
		}
	}
	return float64(hits) / float64(counted)
}

// Che's approximation against a simulated LRU cache on independent-reference traces: zipfian and
// uniform popularity, caches from 5 % to 50 % of the blocks, within 2 points.
func TestHitRatioAgainstLRU(t *testing.T) {
	const blocks, requests = 2000, 300_000
	for _, s := range []float64{0, 0.8, 1.1} {
		w := make([]float64, blocks)
		sum := 0.0
		for i := range w {
			w[i] = 1 / math.Pow(float64(i+1), s)
			sum += w[i]
		}
		var h Histogram
		cum := make([]float64, blocks)
		acc := 0.0
		for i := range w {
			h = append(h, Bucket{Rate: w[i] / sum * 1000, Blocks: 1})
			acc += w[i] / sum
			cum[i] = acc
		}
		rng := rand.New(rand.NewPCG(1, uint64(s*10)))
		trace := make([]int, requests)
		for i := range trace {
			u := rng.Float64()
			lo, hi := 0, blocks-1
			for lo < hi {
				mid := (lo + hi) / 2
				if cum[mid] < u {
					lo = mid + 1
				} else {
					hi = mid
				}
			}
			trace[i] = lo
		}
		for _, c := range []int{100, 400, 1000} {
			che, sim := HitRatio(h, float64(c)), lru(trace, c)
			t.Logf("zipf s=%.1f cache %d/%d: Che %.4f, LRU %.4f", s, c, blocks, che, sim)
			if math.Abs(che-sim) > 0.02 {
				t.Errorf("zipf s=%.1f cache %d: Che %.4f, LRU %.4f: more than 2 points apart", s, c, che, sim)
			}
		}
	}
	if HitRatio(Histogram{{Rate: 1, Blocks: 10}}, 10) != 1 || HitRatio(Histogram{{Rate: 1, Blocks: 10}}, 0) != 0 {
		t.Error("a cache holding every block must always hit, an empty one never")
	}
}

// Fit recovers the costs behind measurements with 0.5 % noise, and drops a kind of work that costs nothing.
func TestFit(t *testing.T) {
	want := Model{Idle: 0.04, HitCost: 2e-5, MissCost: 1.5e-3, Write: 8e-5, Scan: 0}
	rng := rand.New(rand.NewPCG(3, 4))
	var samples []Sample
	for range 60 {
		l := Load{Reads: rng.Float64() * 20000, Writes: rng.Float64() * 5000, Scans: rng.Float64() * 1000}
		hit := 0.15 + 0.85*rng.Float64()
		// Three nodes measured together: their loads and usages summed, each idling.
		u := want.Predict(l, hit) + 2*want.Idle
		samples = append(samples, Sample{Load: l, Hit: hit, Nodes: 3, Usage: u * (1 + 0.005*rng.NormFloat64())})
	}
	got, err := Fit(samples)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fitted %+v", got)
	for name, pair := range map[string][2]float64{"idle": {got.Idle, want.Idle}, "hit": {got.HitCost, want.HitCost}, "miss": {got.MissCost, want.MissCost}, "write": {got.Write, want.Write}} {
		if math.Abs(pair[0]-pair[1]) > 0.1*pair[1] {
			t.Errorf("%s cost %.3g, want %.3g within 10 %%", name, pair[0], pair[1])
		}
	}
	if got.Scan < 0 || got.Scan > 1e-5 {
		t.Errorf("scan cost %.3g, want about 0 and never negative", got.Scan)
	}
	if _, err := Fit(samples[:4]); err == nil {
		t.Error("4 samples fitted an idle usage and 4 costs")
	}
	// No sample scanned nor missed: those costs stay 0 and the rest fit.
	var cached []Sample
	for _, s := range samples {
		s.Load.Scans, s.Hit = 0, 1
		s.Usage = want.Predict(s.Load, 1) + 2*want.Idle
		cached = append(cached, s)
	}
	if m, err := Fit(cached); err != nil || m.Scan != 0 || m.MissCost != 0 || math.Abs(m.Write-want.Write) > 0.01*want.Write {
		t.Errorf("fit without scans or misses: %+v, %v", m, err)
	}
}

// With the idle usage measured, samples whose usage does not follow their load (writes whose cost
// is the compactions they set off, flat whatever their rate) cost their own kind of work only: the
// read costs come out as the read samples say, while the free fit raises its idle usage to meet
// the flat samples and lowers the read costs with it.
func TestFitAtIdle(t *testing.T) {
	want := Model{Idle: 0.1, HitCost: 5e-5, MissCost: 2e-3}
	rng := rand.New(rand.NewPCG(7, 8))
	var samples []Sample
	for range 30 {
		l := Load{Reads: rng.Float64() * 2000}
		hit := 0.15 + 0.85*rng.Float64()
		samples = append(samples, Sample{Load: l, Hit: hit, Nodes: 3, Usage: want.Predict(l, hit) + 2*want.Idle})
	}
	for range 8 { // writes: usage about 2 whatever the rate
		l := Load{Writes: 50 + rng.Float64()*200}
		samples = append(samples, Sample{Load: l, Hit: 1, Nodes: 3, Usage: 1.8 + 0.4*rng.Float64()})
	}
	got, err := FitAtIdle(samples, want.Idle)
	if err != nil {
		t.Fatal(err)
	}
	free, err := Fit(samples)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("at idle %+v; free %+v", got, free)
	if got.Idle != want.Idle {
		t.Errorf("idle %.3g, want the measured %.3g", got.Idle, want.Idle)
	}
	for name, pair := range map[string][2]float64{"hit": {got.HitCost, want.HitCost}, "miss": {got.MissCost, want.MissCost}} {
		if math.Abs(pair[0]-pair[1]) > 0.05*pair[1] {
			t.Errorf("%s cost %.3g, want %.3g within 5 %%", name, pair[0], pair[1])
		}
	}
	if free.Idle <= want.Idle {
		t.Errorf("free fit's idle %.3g: the flat write samples should raise it above %.3g", free.Idle, want.Idle)
	}
	if _, err := FitAtIdle(samples[:3], 0.1); err == nil {
		t.Error("3 samples fitted 4 costs")
	}
}

func TestModelFile(t *testing.T) {
	dir := t.TempDir()
	if m, err := LoadModel(filepath.Join(dir, "none.json")); err != nil || m != Default {
		t.Fatalf("missing file: %+v %v, want the default", m, err)
	}
	m := Model{Version: modelVersion, HitCost: 1, MissCost: 2, Write: 3, Scan: 4, Samples: 9}
	p := filepath.Join(dir, "m.json")
	if err := m.Save(p); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadModel(p); err != nil || got != m {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	(Model{Version: 99}).Save(p)
	if _, err := LoadModel(p); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("a future version: %v", err)
	}
}

// bruteMakespan is the lowest predicted makespan over every placement of rs on nodes.
func bruteMakespan(m Model, rs []Range, nodes []Node) float64 {
	best := math.Inf(1)
	sets := make([][]Range, len(nodes))
	var walk func(i int)
	walk = func(i int) {
		if i == len(rs) {
			worst := 0.0
			for j, n := range nodes {
				u, _ := m.predictSet(sets[j], n.CacheBlocks)
				worst = max(worst, u)
			}
			best = min(best, worst)
			return
		}
		for j := range nodes {
			sets[j] = append(sets[j], rs[i])
			walk(i + 1)
			sets[j] = sets[j][:len(sets[j])-1]
		}
	}
	walk(0)
	return best
}

// The packing by predicted usage against the optimum on small random instances of cacheable and
// cache-hostile ranges: every range placed once, the makespan within 1.5× the optimum (it is not
// additive: ranges share a cache), and the median ratio logged.
func TestPackAgainstOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	worst := 1.0
	for trial := range 40 {
		var rs []Range
		for i := range 5 + rng.IntN(3) {
			reads := 200 + rng.Float64()*2000
			blocks := 50 + rng.Float64()*2000
			rs = append(rs, Range{ID: uint64(i + 1), Load: Load{Reads: reads, Writes: rng.Float64() * 500},
				Hist: Histogram{{Rate: reads * 0.8 / (blocks / 10), Blocks: blocks / 10}, {Rate: reads * 0.2 / blocks, Blocks: blocks}}})
		}
		nodes := []Node{{ID: 1, CacheBlocks: 800}, {ID: 2, CacheBlocks: 800}}
		ps := Default.Pack(rs, nodes)
		placed := 0
		for _, p := range ps {
			placed += len(p.Ranges)
		}
		if placed != len(rs) {
			t.Fatalf("trial %d: %d ranges placed of %d", trial, placed, len(rs))
		}
		ratio := Makespan(ps) / bruteMakespan(Default, rs, nodes)
		worst = max(worst, ratio)
		if ratio > 1.5 {
			t.Errorf("trial %d: packing %.3f, optimum %.3f", trial, Makespan(ps), bruteMakespan(Default, rs, nodes))
		}
	}
	t.Logf("worst packing / optimum over 40 instances: %.3f", worst)
}

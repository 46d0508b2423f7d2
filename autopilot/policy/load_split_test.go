package policy

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

func imbalance(a, b float64) float64 { return operator.Imbalance(a, b) }

// splitRun feeds both estimators the request stream a range's leader would report — one-second
// windows of perWindow requests, each reduced to a KeySample of DefaultKeySampleSize — until the search
// meets load_split's default readiness rule (MinSamples seen, SettleSamples since entering the
// ping-pong zone), or maxWindows, and returns the key load_split would propose (the estimate rounded
// on the recent samples). The baseline sees exactly the same sampled requests.
func splitRun(gen keyGen, r *rand.Rand, cfg SearchConfig, perWindow, maxWindows int, seed uint64) (cruz, baseline []byte, f *SplitKeyFinder) {
	ready := LoadSplitConfig{}.withDefaults()
	f = NewSplitKeyFinder(cfg)
	base := NewReservoirMedian(model.DefaultKeySampleSize, seed)
	sampler := model.NewKeySampler(model.DefaultKeySampleSize, seed)
	recent := ready.RecentWindows
	var samples []*model.KeySample
	at := model.TextEpoch
	for w := 0; w < maxWindows; w++ {
		if f.Observed() >= ready.MinSamples && f.Linear() && f.ObservedLinear() >= ready.SettleSamples {
			break
		}
		for i := 0; i < perWindow; i++ {
			sampler.Record(gen(r))
		}
		at = at.Add(time.Second)
		s := sampler.Take(at)
		feed(f, s, 2, nil)
		samples = append(samples, s)
		if len(samples) > recent {
			samples = samples[1:]
		}
		for _, kc := range s.Keys {
			for i := uint32(0); i < kc.Count; i++ {
				base.Observe(kc.Key)
			}
		}
	}
	return roundSplitKey(f.SplitKey(), samples), base.SplitKey(), f
}

type splitStats struct{ sum, worst float64 }

func (s *splitStats) add(x float64) {
	s.sum += x
	s.worst = max(s.worst, x)
}

func (s splitStats) String(n int) string {
	return fmt.Sprintf("mean %4.1f%% worst %4.1f%%", 100*s.sum/float64(n), 100*s.worst)
}

// TestLoadSplitKeyBalancesLoad is the acceptance test of the split-key search: for zipfian, hotspot and
// latest request distributions (YCSB's generators, 100 k records), splitting at the key the Cruz search
// reports once load_split would act leaves the two halves' loads within 10 % of each other. The
// baseline — the median of a reservoir sample of the same sampled requests, as large as one window's
// sample — is reported next to it, with YCSB's scrambled zipfian and uniform for reference. Loads are
// evaluated on an independent stream of 200 k requests.
func TestLoadSplitKeyBalancesLoad(t *testing.T) {
	const (
		records   = 100_000
		perWindow = 3000 // a range just above the 2500 ops/s threshold
	)
	seeds := int64(20)
	if raceEnabled || testing.Short() {
		seeds = 6
	}
	var report []string
	for _, dist := range distributions {
		gen, err := newKeyGen(dist, records)
		if err != nil {
			t.Fatal(err)
		}
		oracle := newLoadOracle(gen, rand.New(rand.NewSource(99)), 200_000)
		var cruz, base splitStats
		var observed uint64
		for seed := int64(1); seed <= seeds; seed++ {
			gen, _ := newKeyGen(dist, records)
			ck, bk, f := splitRun(gen, rand.New(rand.NewSource(seed)), SearchConfig{}, perWindow, 60, uint64(seed))
			observed += f.Observed()
			l, bl := oracle.leftShare(ck), oracle.leftShare(bk)
			ci, bi := imbalance(l, 1-l), imbalance(bl, 1-bl)
			cruz.add(ci)
			base.add(bi)
			asserted := dist == "zipfian" || dist == "hotspot" || dist == "latest"
			if asserted && ci > 0.10 {
				t.Errorf("%s seed %d: split at %q leaves %.1f%% / %.1f%% of the load (%.1f%% apart, want ≤ 10%%); "+
					"search saw %d requests, linear=%v", dist, seed, ck, 100*l, 100*(1-l), 100*ci, f.Observed(), f.Linear())
			}
		}
		report = append(report, fmt.Sprintf("%-9s  cruz: %s   reservoir median: %s   (%d sampled requests on average)",
			dist, cruz.String(int(seeds)), base.String(int(seeds)), observed/uint64(seeds)))
	}
	t.Logf("halves' load imbalance |L−R|/max(L,R) over %d seeds, %d records; reservoir of %d keys:\n%s",
		seeds, records, model.DefaultKeySampleSize, strings.Join(report, "\n"))
}

// TestSplitKeySearchStrategies reproduces the setting of the thesis's figures 4.1–4.3 and 4.5 (zipfian
// requests over 10 k keys, and 300 k keys): linear only, exponential only, and the ping-pong switch after
// 2, 4 and 8 pairs, each fed 20 k requests directly. It asserts only that the default (4 pairs) is
// within 10 %; the rest is reported.
func TestSplitKeySearchStrategies(t *testing.T) {
	type variant struct {
		name string
		cfg  SearchConfig
	}
	variants := []variant{
		{"linear", SearchConfig{Strategy: SearchLinear, AverageOver: -1}},
		{"exponential", SearchConfig{Strategy: SearchExponential, AverageOver: -1}},
		{"ping-pong 2 pairs", SearchConfig{PingPongPairs: 2}},
		{"ping-pong 4 pairs", SearchConfig{PingPongPairs: 4}},
		{"ping-pong 8 pairs", SearchConfig{PingPongPairs: 8}},
		{"4 pairs, no averaging", SearchConfig{PingPongPairs: 4, AverageOver: -1}},
	}
	const requests = 20_000
	seeds := int64(10)
	if raceEnabled || testing.Short() {
		seeds = 3
	}
	var report []string
	for _, keys := range []int64{10_000, 300_000} {
		gen, _ := newKeyGen("zipfian", keys)
		oracle := newLoadOracle(gen, rand.New(rand.NewSource(99)), 200_000)
		for _, v := range variants {
			var st splitStats
			for seed := int64(1); seed <= seeds; seed++ {
				gen, _ := newKeyGen("zipfian", keys)
				r := rand.New(rand.NewSource(seed))
				f := NewSplitKeyFinder(v.cfg)
				for i := 0; i < requests; i++ {
					f.Observe(gen(r))
				}
				l := oracle.leftShare(f.SplitKey())
				st.add(imbalance(l, 1-l))
				if v.name == "ping-pong 4 pairs" && imbalance(l, 1-l) > 0.10 {
					t.Errorf("%d keys, seed %d: %s split is %.1f%% apart", keys, seed, v.name, 100*imbalance(l, 1-l))
				}
			}
			report = append(report, fmt.Sprintf("%7d keys  %-22s %s", keys, v.name, st.String(int(seeds))))
		}
	}
	t.Logf("zipfian, %d requests, %d seeds:\n%s", requests, seeds, strings.Join(report, "\n"))
}

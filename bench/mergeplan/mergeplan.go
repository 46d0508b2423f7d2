// Package mergeplan is the simulation of Ghosh's thesis, chapter 5.4: YCSB key streams (load, then
// inserts and updates drawn uniform, zipfian or latest) flushed from a memtable of a fixed number of
// entries into sorted runs, which each strategy of plan/mergeplan then merges; it reports each plan's
// cost against the lower bound, as Figures 5.6 (update share) and 5.7 (memtable size) do.
//
// A benchmark, not a test: it reports numbers and asserts nothing. It never touches an engine or a
// cluster; the real chains are measured by node/backups' BenchmarkZipfChain and `shoal backup plan`.
package mergeplan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/shoaldb/shoal/plan/mergeplan"
)

// Workload is one YCSB-like key stream and how it is flushed into runs.
type Workload struct {
	Distribution string  `json:"distribution"` // uniform, zipfian or latest
	Records      int     `json:"records"`      // keys inserted by the load phase
	Operations   int     `json:"operations"`   // inserts and updates of the run phase
	UpdateShare  float64 `json:"update_share"` // the rest are inserts of new keys
	Memtable     int     `json:"memtable"`     // entries per flush
	Seed         uint64  `json:"seed"`
}

// Row is one strategy's plan on one workload.
type Row struct {
	Workload
	Runs     int    `json:"runs"`
	Strategy string `json:"strategy"`
	// Cost is Σ|A_ν| (equation 5.2), IO the keys read and written (5.1), LowerBound Σ|A_i|.
	Cost       float64 `json:"cost"`
	IO         float64 `json:"io"`
	LowerBound float64 `json:"lower_bound"`
	PlanMS     float64 `json:"plan_ms"`
}

// zipfian is YCSB's ZipfianGenerator (Gray et al., theta 0.99) over a growing item count.
type zipfian struct {
	rng                        *rand.Rand
	items                      uint64
	theta, zetan, zeta2, alpha float64
}

func newZipfian(rng *rand.Rand, items uint64) *zipfian {
	z := &zipfian{rng: rng, theta: 0.99}
	z.alpha = 1 / (1 - z.theta)
	z.zeta2 = 1 + math.Pow(0.5, z.theta)
	z.grow(items)
	return z
}

// grow extends the item count, adding the new items' terms to zeta(n).
func (z *zipfian) grow(items uint64) {
	for i := z.items; i < items; i++ {
		z.zetan += 1 / math.Pow(float64(i+1), z.theta)
	}
	z.items = max(z.items, items)
}

// next is a rank in [0, items): 0 the most popular.
func (z *zipfian) next() uint64 {
	n := float64(z.items)
	eta := (1 - math.Pow(2/n, 1-z.theta)) / (1 - z.zeta2/z.zetan)
	u := z.rng.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.zeta2 {
		return 1
	}
	return min(uint64(n*math.Pow(eta*u-eta+1, z.alpha)), z.items-1)
}

// Runs generates w's key stream and returns the runs its memtable flushes, as key sets.
func Runs(w Workload) ([]mergeplan.Set, error) {
	rng := rand.New(rand.NewPCG(w.Seed, w.Seed+1))
	if w.Memtable <= 0 || w.Records <= 0 {
		return nil, fmt.Errorf("merge-plan: memtable and records must be positive")
	}
	count := uint64(w.Records)
	var z *zipfian
	switch w.Distribution {
	case "uniform":
	case "zipfian", "latest":
		z = newZipfian(rng, count)
	default:
		return nil, fmt.Errorf("merge-plan: unknown distribution %q (uniform, zipfian, latest)", w.Distribution)
	}
	var runs []mergeplan.Set
	mem := make([]uint64, 0, w.Memtable)
	add := func(k uint64) {
		mem = append(mem, mergeplan.HashKey(fmt.Appendf(nil, "user%d", k)))
		if len(mem) == w.Memtable {
			runs = append(runs, mergeplan.Keys(mem...))
			mem = mem[:0]
		}
	}
	for k := range count {
		add(k)
	}
	for range w.Operations {
		if rng.Float64() >= w.UpdateShare {
			add(count)
			count++
			if z != nil {
				z.grow(count)
			}
			continue
		}
		switch w.Distribution {
		case "uniform":
			add(rng.Uint64N(count))
		case "zipfian":
			// Scrambled, as YCSB's: popular ranks are spread over the key space.
			add(mergeplan.HashKey(fmt.Appendf(nil, "%d", z.next())) % count)
		case "latest":
			add(count - 1 - z.next())
		}
	}
	if len(mem) > 0 {
		runs = append(runs, mergeplan.Keys(mem...))
	}
	return runs, nil
}

// Simulate plans w's runs with every strategy (and SmallestOutput on HyperLogLog sketches, as the
// thesis estimates unions) and costs each plan on the exact runs.
func Simulate(w Workload) ([]Row, error) {
	runs, err := Runs(w)
	if err != nil {
		return nil, err
	}
	lb := mergeplan.LowerBound(runs)
	var rows []Row
	plan := func(name string, sets []mergeplan.Set, s mergeplan.Strategy) error {
		start := time.Now()
		p, err := mergeplan.Make(sets, s, mergeplan.Options{Seed: w.Seed})
		if err != nil {
			return err
		}
		took := time.Since(start)
		cost, _ := mergeplan.Cost(p, runs)
		rows = append(rows, Row{Workload: w, Runs: len(runs), Strategy: name, Cost: cost, IO: mergeplan.IO(p, runs),
			LowerBound: lb, PlanMS: float64(took.Microseconds()) / 1000})
		return nil
	}
	for _, s := range mergeplan.Strategies {
		if err := plan(s.String(), runs, s); err != nil {
			return nil, err
		}
	}
	sketches := make([]mergeplan.Set, len(runs))
	for i, r := range runs {
		sketches[i] = mergeplan.SketchOf(r.(mergeplan.KeySet))
	}
	if err := plan("smallest-output-hll", sketches, mergeplan.SmallestOutput); err != nil {
		return nil, err
	}
	return rows, nil
}

// UpdateSweep is Figure 5.6's experiment: 100 000 operations on 1 000 records, memtable 1 000, the
// update share from 0 to 100 %.
func UpdateSweep(dist string, seed uint64) []Workload {
	var out []Workload
	for u := 0; u <= 100; u += 20 {
		out = append(out, Workload{Distribution: dist, Records: 1000, Operations: 100_000, UpdateShare: float64(u) / 100,
			Memtable: 1000, Seed: seed})
	}
	return out
}

// MemtableSweep is Figure 5.7's experiment: 100 runs of memtables of 10 to 10 000 entries, 1 000
// records, updates to inserts 60:40.
func MemtableSweep(dist string, seed uint64) []Workload {
	var out []Workload
	for _, m := range []int{10, 100, 1000, 10_000} {
		out = append(out, Workload{Distribution: dist, Records: 1000, Operations: max(m*100-1000, 0), UpdateShare: 0.6,
			Memtable: m, Seed: seed})
	}
	return out
}

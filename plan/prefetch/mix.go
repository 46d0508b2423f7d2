package prefetch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// MixConfig shapes a generated mix of recurring jobs after the traces of the thesis's chapter 6.2,
// scaled down to a few nodes: a few spans are read by many jobs (Zipf popularity: in the trace 15 % of
// files had more than 10 readers and shared files were 90 % of the input), read rates do not follow
// popularity, many runs start together at the top of their period, and every run has at least one
// period of slack before it in which its span may be prefetched.
type MixConfig struct {
	Seed    uint64
	Nodes   int
	Spans   int
	Jobs    int
	Slot    time.Duration
	Horizon int // slots
	// MinSize and MaxSize bound the span sizes, drawn log-uniformly (bytes).
	MinSize, MaxSize float64
	// Bandwidth is each node's disk bandwidth (bytes/s); Foreground is the share the foreground load
	// takes at its daily peak, which moves across the window as a sine.
	Bandwidth, Foreground float64
	// CacheShare is each node's cache budget for the jobs as a share of the bytes of the spans they read
	// on it.
	CacheShare float64
}

// DefaultMix is a medium-load mix: 3 nodes, 30 spans of 16 MiB to 1 GiB, 90 jobs every 1 or 2 hours
// over 6 hours in 5-minute slots, disks of 400 MB/s with up to 30 % taken by the foreground, and a cache
// as large as the spans each node's jobs read.
func DefaultMix(seed uint64) MixConfig {
	return MixConfig{Seed: seed, Nodes: 3, Spans: 30, Jobs: 90, Slot: 5 * time.Minute, Horizon: 72,
		MinSize: 16 << 20, MaxSize: 1 << 30, Bandwidth: 400e6, Foreground: 0.3, CacheShare: 1}
}

// Mix generates an instance from cfg.
func Mix(cfg MixConfig) (Instance, error) {
	if cfg.Nodes < 1 || cfg.Spans < 1 || cfg.Jobs < 1 || cfg.Horizon < 24 || cfg.Slot <= 0 ||
		!(cfg.MinSize > 0) || cfg.MaxSize < cfg.MinSize || cfg.Foreground < 0 || cfg.Foreground >= 1 || cfg.CacheShare < 0 {
		return Instance{}, fmt.Errorf("prefetch: mix %+v: want ≥ 1 node, span and job, a horizon of ≥ 24 slots, 0 < min size ≤ max size, 0 ≤ foreground < 1, cache share ≥ 0", cfg)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed))
	in := Instance{Slot: cfg.Slot, Horizon: cfg.Horizon}
	for n := 0; n < cfg.Nodes; n++ {
		bw := make([]float64, cfg.Horizon)
		phase := rng.Float64() * 2 * math.Pi
		for t := range bw {
			fg := cfg.Foreground * (0.5 + 0.5*math.Sin(phase+2*math.Pi*float64(t)/float64(cfg.Horizon)))
			bw[t] = cfg.Bandwidth * (1 - fg)
		}
		in.Nodes = append(in.Nodes, Node{Bandwidth: bw})
	}
	for s := 0; s < cfg.Spans; s++ {
		size := cfg.MinSize * math.Pow(cfg.MaxSize/cfg.MinSize, rng.Float64())
		in.Spans = append(in.Spans, Span{ID: fmt.Sprintf("s%02d", s), Node: s % cfg.Nodes, Size: math.Round(size)})
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(cfg.Seed^0x21f, cfg.Seed)), 1.1, 1, uint64(cfg.Spans-1))
	// One hour and two hours, in slots (at least 4 and 8).
	hour := max(4, int(time.Hour/cfg.Slot))
	periods := []int{hour, 2 * hour}
	for j := 0; j < cfg.Jobs; j++ {
		period := periods[rng.IntN(len(periods))]
		if 2*period > cfg.Horizon {
			period = cfg.Horizon / 2
		}
		// Half the jobs start at the top of the period; the rest on a quarter hour.
		offset := 0
		if rng.IntN(2) == 1 {
			offset = rng.IntN(4) * period / 4
		}
		duration := 1 + rng.IntN(3)
		in.Jobs = append(in.Jobs, Job{
			Name:     fmt.Sprintf("j%03d", j),
			Span:     in.Spans[zipf.Uint64()].ID,
			Start:    period + offset,
			Duration: duration,
			Deadline: duration + 1 + rng.IntN(2*duration),
			Period:   period,
		})
	}
	read := map[string]bool{}
	for _, j := range in.Jobs {
		read[j.Span] = true
	}
	for _, s := range in.Spans {
		if read[s.ID] {
			in.Nodes[s.Node].Cache += cfg.CacheShare * s.Size
		}
	}
	return in, in.Validate()
}

package linearroad

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
)

// Bin is one second of the measured window.
type Bin struct {
	At           float64 `json:"t"` // seconds into the measured window at the bin's end
	EventsPerSec float64 `json:"events_per_sec"`
	LocalShare   float64 `json:"local_share"` // of the bin's state accesses (1 with none)
	// Retries are events answered RETRY: sent to a node not leading their range, or behind such
	// an event of their key in the batch.
	Retries uint64 `json:"retries"`
	// NewNodeApplied are the events the joined node's tasks applied so far; NewNodeLeads the span's
	// ranges it leads.
	NewNodeApplied uint64 `json:"new_node_applied,omitempty"`
	NewNodeLeads   int    `json:"new_node_leads,omitempty"`
	Ranges         int    `json:"ranges"`
	// Moves are the span's ranges that are new or led by another node than a bin before.
	Moves int `json:"moves"`
}

// sampler fills the bins of the measured window, one a second.
type sampler struct {
	cfg     Config
	c       *benchutil.Cluster
	cl      *client.Client
	w       *window
	prevAt  time.Time
	start   time.Time
	prevEv  int64
	prevAcc accesses
	leaders map[uint64]uint64
	bins    []Bin
}

func newSampler(cfg Config, c *benchutil.Cluster, cl *client.Client, w *window, start time.Time, acc accesses) *sampler {
	return &sampler{cfg: cfg, c: c, cl: cl, w: w, start: start, prevAt: start, prevAcc: acc}
}

// run samples until ctx ends.
func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sample(ctx)
		}
	}
}

func (s *sampler) sample(ctx context.Context) {
	now, ev, acc := time.Now(), s.w.events.Load(), stateAccesses(s.c)
	b := Bin{At: now.Sub(s.start).Seconds(), EventsPerSec: float64(ev-s.prevEv) / now.Sub(s.prevAt).Seconds(),
		LocalShare: share(acc.local-s.prevAcc.local, acc.remote-s.prevAcc.remote), Retries: acc.retries - s.prevAcc.retries}
	s.prevAt, s.prevEv, s.prevAcc = now, ev, acc
	var joined uint64
	if s.c.Len() > s.cfg.Nodes {
		if n := s.c.Node(s.cfg.Nodes); n != nil {
			joined, b.NewNodeApplied = n.KV.NodeID(), n.KV.StreamStats().Applied
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	rs, err := s.cl.UserRanges(rctx)
	if err != nil && len(s.bins) > 0 { // the ranges as a second before
		prev := s.bins[len(s.bins)-1]
		b.Ranges, b.NewNodeLeads = prev.Ranges, prev.NewNodeLeads
	}
	if err == nil {
		leaders := map[uint64]uint64{}
		for _, st := range rs {
			if !bytes.HasPrefix(st.GetDesc().GetStartKey(), []byte(SegPrefix)) {
				continue
			}
			id, l := st.GetDesc().GetRangeId(), st.GetLeaderNodeId()
			leaders[id] = l
			b.Ranges++
			if joined != 0 && l == joined {
				b.NewNodeLeads++
			}
			if s.leaders != nil && s.leaders[id] != l {
				b.Moves++
			}
		}
		s.leaders = leaders
	}
	s.bins = append(s.bins, b)
}

func share(local, remote uint64) float64 {
	if local+remote == 0 {
		return 1
	}
	return float64(local) / float64(local+remote)
}

// joinFigures reads the join's figures from the bins: joinAt is the join's time into the window.
func (r *Result) joinFigures(joinAt float64) {
	// since is the time from the join to the end of the last bin after it where bad holds: 0 if
	// none, -1 if the last bin's (not back within the window).
	since := func(bad func(Bin) bool) float64 {
		last := -1
		for i, b := range r.Timeline {
			if b.At > joinAt && bad(b) {
				last = i
			}
		}
		switch {
		case last < 0:
			return 0
		case last == len(r.Timeline)-1:
			return -1
		}
		return r.Timeline[last].At - joinAt
	}
	r.JoinLocalS = since(func(b Bin) bool { return b.LocalShare < 1 })
	r.JoinRoutedS = since(func(b Bin) bool { return b.Retries > 0 })
	r.JoinSettledS = since(func(b Bin) bool { return b.Moves > 0 })
	r.JoinAlignedS = r.JoinLocalS
	if r.JoinLocalS >= 0 && (r.JoinRoutedS < 0 || r.JoinRoutedS > r.JoinLocalS) {
		r.JoinAlignedS = r.JoinRoutedS
	}
	run := 0
	for _, b := range r.Timeline {
		if run++; b.At <= joinAt || b.Retries == 0 {
			run = 0
		}
		r.JoinRerouteMaxS = max(r.JoinRerouteMaxS, float64(run))
	}
	r.JoinFirstEventS = -1
	for _, b := range r.Timeline {
		if b.NewNodeApplied > 0 {
			r.JoinFirstEventS = b.At - joinAt
			break
		}
	}
	from := joinAt + max(r.JoinSettledS, r.JoinAlignedS)
	var n int
	var sum float64
	for _, b := range r.Timeline {
		if r.JoinSettledS >= 0 && r.JoinAlignedS >= 0 && b.At > from+1 {
			n, sum = n+1, sum+b.EventsPerSec
		}
	}
	if n >= 3 {
		r.EventsPerSecSettled = sum / float64(n)
	}
}

// Summary states a run's figures against the goals, one line an arm: each arm's throughput and
// toll p99 against the first arm's (the unaligned baseline), and with a join the throughput after
// it against before × (N+1)/N × 0.8, the time until alignment was back, and the checker's verdict.
func Summary(rs []Result) []string {
	var out []string
	for _, r := range rs {
		line := fmt.Sprintf("%s: %.0f events/s, toll p99 %.1f ms, %.1f %% local", r.Arm, r.EventsPerSec, r.TollP99Ms, 100*r.LocalShare)
		if b := rs[0]; r.Arm != b.Arm && b.EventsPerSec > 0 && b.TollP99Ms > 0 {
			line += fmt.Sprintf(" (%.2f× the throughput, %.2f× the p99 of %s)", r.EventsPerSec/b.EventsPerSec, r.TollP99Ms/b.TollP99Ms, b.Arm)
		}
		if r.EventsPerSecBeforeJoin > 0 {
			goal := r.EventsPerSecBeforeJoin * float64(r.Nodes+1) / float64(r.Nodes) * 0.8
			line += fmt.Sprintf("; join: %.0f → %.0f events/s (settled %.0f; goal ≥ %.0f), aligned after %.0f s (reroutes ≤ %.0f s), placement settled after %.0f s, new node's first event after %.0f s, leads %d",
				r.EventsPerSecBeforeJoin, r.EventsPerSecAfterJoin, r.EventsPerSecSettled, goal, r.JoinAlignedS, r.JoinRerouteMaxS, r.JoinSettledS, r.JoinFirstEventS, r.NewNodeLeads)
		}
		line += fmt.Sprintf("; exactly-once ok=%v (%d events, %d duplicates, %d violations)", r.Check.OK, r.Check.Acknowledged, r.Check.Duplicates, r.Check.Violations)
		out = append(out, line)
	}
	return out
}

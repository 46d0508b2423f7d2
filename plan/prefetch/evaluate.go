package prefetch

import (
	"fmt"
	"math"
)

// Result is what a schedule does over the horizon.
type Result struct {
	Strategy   string  `json:"strategy"`
	Runs       int     `json:"runs"`
	Admitted   int     `json:"admitted"`
	OnTime     int     `json:"on_time"`      // admitted runs done by their deadline
	Jobs       int     `json:"jobs"`         // jobs with a run in the horizon
	JobsOnTime int     `json:"jobs_on_time"` // of those, the ones with every run admitted and on time
	Peak       float64 `json:"peak"`         // bytes/s: the most disk bandwidth the runs (and the node's base load) take on one node in one slot
	PeakNode   int     `json:"peak_node"`
	PeakSlot   int     `json:"peak_slot"`
	DiskBytes  float64 `json:"disk_bytes"` // bytes the schedule's transfers read from disk inside the horizon
	// Overload is the most the planned rates ask above a node's bandwidth budget in one slot (bytes/s; 0
	// if never). Where they do, the evaluator shares the budget in proportion and transfers run late.
	Overload float64 `json:"overload"`
	// CacheOverflow is the most the planned copies hold above a node's cache budget (bytes; 0 if never).
	CacheOverflow float64 `json:"cache_overflow"`
	// RunOnTime says, by run, whether it was admitted and done by its deadline.
	RunOnTime []bool `json:"-"`
}

// flow is a transfer in flight in the evaluator.
type flow struct {
	left float64 // bytes
	done float64 // the time (in slots) its last byte arrives; +Inf while unfinished
}

// Evaluate runs s over in's horizon, slot by slot: each transfer asks for its rate from its start until
// its bytes are read; a node whose budget cannot give every transfer its rate gives each the same share
// of what it asks (the budget less the node's base load, which is served first and counts in the
// peak). A run reading its own transfer is done when the transfer is; a run reading a copy is
// done its own duration after both its start and the copy's last byte.
func Evaluate(in *Instance, s *Schedule) (Result, error) {
	if err := in.Validate(); err != nil {
		return Result{}, err
	}
	if err := check(s); err != nil {
		return Result{}, err
	}
	res := Result{Strategy: s.Strategy.String(), Runs: len(s.Runs)}
	sec := in.seconds()
	flows := make([]flow, len(s.Transfers))
	for k, tr := range s.Transfers {
		flows[k] = flow{left: tr.Rate * float64(tr.End-tr.Start) * sec, done: math.Inf(1)}
	}
	asked := make([]float64, len(in.Nodes))
	for t := 0; t < in.Horizon; t++ {
		clear(asked)
		for k, tr := range s.Transfers {
			if tr.Start <= t && flows[k].left > 0 {
				asked[tr.Node] += tr.Rate
			}
		}
		used := make([]float64, len(in.Nodes))
		for n := range used {
			used[n] = in.base(n, t)
		}
		for k, tr := range s.Transfers {
			f := &flows[k]
			if tr.Start > t || f.left <= 0 {
				continue
			}
			rate := tr.Rate * min(1, max(0, in.budget(tr.Node, t)-in.base(tr.Node, t))/asked[tr.Node])
			got := min(f.left, rate*sec)
			if got >= f.left*(1-eps) {
				f.done = float64(t) + f.left/(rate*sec)
				got = f.left
			}
			f.left -= got
			used[tr.Node] += got / sec
			res.DiskBytes += got
		}
		for n, u := range used {
			if u > res.Peak {
				res.Peak, res.PeakNode, res.PeakSlot = u, n, t
			}
		}
	}
	res.Overload, res.CacheOverflow = overload(in, s)
	res.RunOnTime = make([]bool, len(s.Runs))
	jobOK := make([]int, len(in.Jobs)) // 1: every run so far on time, -1: one was not, 0: no run
	for r, run := range s.Runs {
		sv := s.Serves[r]
		ok := false
		if sv.Admitted {
			res.Admitted++
			finish := flows[sv.Transfer].done
			if sv.Source == FromCache {
				finish = max(float64(run.Start), finish) + float64(run.End-run.Start)
			}
			ok = finish <= float64(run.Deadline)+1e-6
		}
		res.RunOnTime[r] = ok
		if ok {
			res.OnTime++
			if jobOK[run.Job] == 0 {
				jobOK[run.Job] = 1
			}
		} else {
			jobOK[run.Job] = -1
		}
	}
	for _, v := range jobOK {
		if v != 0 {
			res.Jobs++
		}
		if v == 1 {
			res.JobsOnTime++
		}
	}
	return res, nil
}

// check rejects a schedule whose serves do not match its runs and transfers.
func check(s *Schedule) error {
	if len(s.Serves) != len(s.Runs) {
		return fmt.Errorf("prefetch: %s: %d serves for %d runs", s.Strategy, len(s.Serves), len(s.Runs))
	}
	for r, sv := range s.Serves {
		if !sv.Admitted {
			continue
		}
		if sv.Transfer < 0 || sv.Transfer >= len(s.Transfers) {
			return fmt.Errorf("prefetch: %s: run %d served by transfer %d of %d", s.Strategy, r, sv.Transfer, len(s.Transfers))
		}
		tr, run := s.Transfers[sv.Transfer], s.Runs[r]
		switch {
		case tr.Item != run.Item:
			return fmt.Errorf("prefetch: %s: run %d (item %d) served by a transfer of item %d", s.Strategy, r, run.Item, tr.Item)
		case sv.Source == FromDisk && tr.Run != r:
			return fmt.Errorf("prefetch: %s: run %d reads from disk through run %d's read", s.Strategy, r, tr.Run)
		case sv.Source == FromCache && tr.Until < run.End:
			return fmt.Errorf("prefetch: %s: run %d reads a copy released at slot %d, before it is done at %d",
				s.Strategy, r, tr.Until, run.End)
		}
	}
	return nil
}

// overload is the most a schedule's planned rates ask above a bandwidth budget (less the node's base
// load) and its copies hold above a cache budget, on any node in any slot.
func overload(in *Instance, s *Schedule) (bw, cache float64) {
	for n := range in.Nodes {
		rates := make([]float64, in.Horizon)
		held := make([]float64, in.Horizon)
		for t := range held {
			held[t] = in.held(n, t)
		}
		for _, tr := range s.Transfers {
			if tr.Node != n {
				continue
			}
			for t := tr.Start; t < min(tr.End, in.Horizon); t++ {
				rates[t] += tr.Rate
			}
			for t := tr.Start; t < min(tr.Until, in.Horizon); t++ {
				held[t] += tr.Held(s.Items[tr.Item].Size, t)
			}
		}
		for t := range rates {
			bw = max(bw, rates[t]-max(0, in.budget(n, t)-in.base(n, t)))
			cache = max(cache, held[t]-in.Nodes[n].Cache)
		}
	}
	return max(bw, 0), max(cache, 0)
}

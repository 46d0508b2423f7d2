// Package prefetch plans, for recurring scan jobs with deadlines, which spans each node reads ahead into
// its cache and when, so that the disks' peak bandwidth stays low and every admitted job finishes on time.
// It implements the planner of Ghosh's thesis (2018), chapter 6 (NetCachier, Algorithms 6.1 and 6.2):
// spans taken greedily by aggregate read rate over size, a constant-rate prefetch that finishes when the
// first run starts, candidate start times where cached copies are released, and admission of the jobs
// whose remaining disk reads still fit. Beside it are the chapter's baselines over the same inputs —
// DemandReads (its RemoteRead: every run reads its span from disk) and DemandPaging (copies cached on
// first read, evicted by PACMan's LIFE) — an evaluator of any schedule, and the LP relaxation's lower
// bound on the peak, solved with gonum's simplex.
//
// It is a leaf solver: it sees span sizes, job timings and per-node budgets only, never an engine, a
// cache or a cluster, and it never reads data itself — callers carry out the schedule.
//
// Time is in slots of Instance.Slot; a run of a job occupies the slots [Start, Start+Duration) when it
// reads at its own speed and must be done by the end of slot Start+Deadline-1. Sizes are bytes, rates
// bytes per second.
package prefetch

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Span is a unit of data a job reads: a key span held by one node.
type Span struct {
	ID   string
	Node int
	Size float64 // bytes
}

// Job is a recurring scan: it reads all of Span once per run.
type Job struct {
	Name string
	Span string // a Span's ID
	// Start is the slot of the first run.
	Start int
	// Duration is how many slots a run takes when it reads at its own speed: it reads at Size/Duration.
	// 0 means Deadline.
	Duration int
	// Deadline is how many slots after its start a run must be done by.
	Deadline int
	// Period is the slots between runs; 0: the job runs once.
	Period int
}

// Node is one node's budgets for the jobs: what the foreground load leaves them.
type Node struct {
	// Bandwidth is the disk bandwidth (bytes/s) left in each slot; the last value holds for later
	// slots, and an empty slice means no limit.
	Bandwidth []float64
	// Cache is the bytes of cache prefetched and paged-in copies may hold at once.
	Cache float64
	// Held is the bytes of Cache that copies made before this window still hold in each slot (until
	// their release), never more than in the slot before: the room each frees is the plan's from then
	// on, so a plan made while a period's copies are still held need not squeeze the next period's
	// prefetches into what they leave. Slots past the slice hold none.
	Held []float64
	// Base is the disk bandwidth (bytes/s) transfers planned before this window still take in each
	// slot (prefetches in flight): it counts in the node's peak and comes out of its budget. Slots
	// past the slice have none.
	Base []float64
}

// Instance is a planning window.
type Instance struct {
	Slot    time.Duration
	Horizon int // slots planned: runs whose deadline falls after it are left to the next window
	Nodes   []Node
	Spans   []Span
	Jobs    []Job
}

// Run is one run of a job inside the horizon.
type Run struct {
	Job      int
	Span     int // index in Instance.Spans
	Node     int
	Start    int
	End      int // Start+Duration: when it is done reading at its own speed
	Deadline int // slot by whose start it must be done
	Item     int // the copy of its span it shares with overlapping runs (see Items)
}

// Item is one copy of a span: the runs of the span whose windows overlap read the same data, and so
// may runs due later whose leads reach back to before the copy's first run (shares); another run needs
// a new copy, fetched after the last one's first run.
type Item struct {
	Span     int
	Node     int
	Size     float64
	First    int // the first run's start: a prefetch ends then, or later while its runs follow the copy
	Until    int // the last run's deadline: a run starting later needs a new copy
	Last     int // the last run's end: no run reads a copy after it, so a copy is released then
	Earliest int // the earliest slot a prefetch may start (Options.Lead)
	Runs     []int
}

// Options tune the planner and the baselines.
type Options struct {
	// Lead bounds how many slots before its first run a copy may be prefetched. 0 means one period of
	// the first run's job (so a copy is never older than the data the job's previous run saw), or from
	// slot 0 for jobs that run once.
	Lead int
	// Rounds is how many times the planner re-plans without the jobs it rejected, freeing what their
	// prefetches held (the chapter's "repeat the algorithm a few times"); 0 means 3.
	Rounds int
	// BoundRows caps the rows of one node's LP in LowerBound, which averages over blocks of slots to
	// stay within it: 0 means 60, cheap enough to compute beside every plan; a cap above the horizon's
	// slots plus the node's copies gives the slot-by-slot LP, the tightest bound (seconds, not
	// milliseconds, on a scenario's window).
	BoundRows int
}

// Strategy names a way to serve the runs.
type Strategy int

const (
	// Planner is the chapter's NetCachier planner (Algorithms 6.1 and 6.2).
	Planner Strategy = iota
	// DemandReads reads every run's span from disk at the run's speed: the chapter's RemoteRead.
	DemandReads
	// DemandPaging caches a span on its first read and serves later runs from the copy, evicting by
	// PACMan's LIFE: the chapter's DemandPaging.
	DemandPaging
)

// Strategies lists every strategy, in the order reports print them.
var Strategies = []Strategy{Planner, DemandReads, DemandPaging}

var names = map[Strategy]string{Planner: "planner", DemandReads: "demand-reads", DemandPaging: "demand-paging"}

func (s Strategy) String() string {
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("strategy(%d)", int(s))
}

// Validate checks that in is well formed: every job names a span, every span a node, and times are sane.
func (in *Instance) Validate() error {
	if in.Slot <= 0 {
		return fmt.Errorf("prefetch: slot %v: must be positive", in.Slot)
	}
	if in.Horizon <= 0 {
		return fmt.Errorf("prefetch: horizon %d slots: must be positive", in.Horizon)
	}
	for n, node := range in.Nodes {
		if node.Cache < 0 {
			return fmt.Errorf("prefetch: node %d: cache budget %v is negative", n, node.Cache)
		}
		for t, b := range node.Bandwidth {
			if b < 0 || math.IsNaN(b) {
				return fmt.Errorf("prefetch: node %d: bandwidth %v in slot %d", n, b, t)
			}
		}
		for t, b := range node.Base {
			if b < 0 || math.IsNaN(b) {
				return fmt.Errorf("prefetch: node %d: base load %v in slot %d", n, b, t)
			}
		}
		for t, h := range node.Held {
			if h < 0 || h > node.Cache || math.IsNaN(h) {
				return fmt.Errorf("prefetch: node %d: %v bytes held in slot %d of a cache of %v", n, h, t, node.Cache)
			}
			// Earlier copies only free their room: the baselines check a copy they keep against the
			// room at its first slot.
			if t > 0 && h > node.Held[t-1] {
				return fmt.Errorf("prefetch: node %d: %v bytes held in slot %d, more than the %v of the slot before", n, h, t, node.Held[t-1])
			}
		}
	}
	seen := map[string]bool{}
	for _, s := range in.Spans {
		if seen[s.ID] {
			return fmt.Errorf("prefetch: span %q listed twice", s.ID)
		}
		seen[s.ID] = true
		if s.Node < 0 || s.Node >= len(in.Nodes) {
			return fmt.Errorf("prefetch: span %q on node %d of %d", s.ID, s.Node, len(in.Nodes))
		}
		if !(s.Size > 0) {
			return fmt.Errorf("prefetch: span %q: size %v must be positive", s.ID, s.Size)
		}
	}
	for _, j := range in.Jobs {
		if !seen[j.Span] {
			return fmt.Errorf("prefetch: job %q reads unknown span %q", j.Name, j.Span)
		}
		if j.Start < 0 || j.Deadline < 1 || j.Duration < 0 || j.Duration > j.Deadline || j.Period < 0 {
			return fmt.Errorf("prefetch: job %q: start %d, duration %d, deadline %d, period %d: want start ≥ 0, 1 ≤ deadline, 0 ≤ duration ≤ deadline, period ≥ 0",
				j.Name, j.Start, j.Duration, j.Deadline, j.Period)
		}
	}
	return nil
}

// budget is node n's bandwidth left in slot t.
func (in *Instance) budget(n, t int) float64 {
	bw := in.Nodes[n].Bandwidth
	switch {
	case len(bw) == 0:
		return math.Inf(1)
	case t < len(bw):
		return bw[t]
	default:
		return bw[len(bw)-1]
	}
}

// base is the bandwidth earlier transfers take on node n in slot t.
func (in *Instance) base(n, t int) float64 {
	if b := in.Nodes[n].Base; t < len(b) {
		return b[t]
	}
	return 0
}

// held is the cache node n's earlier copies hold in slot t (Node.Held).
func (in *Instance) held(n, t int) float64 {
	if h := in.Nodes[n].Held; t >= 0 && t < len(h) {
		return h[t]
	}
	return 0
}

func (in *Instance) seconds() float64 { return in.Slot.Seconds() }

// rate is the bytes/s a run reads at its own speed.
func (in *Instance) rate(r Run) float64 {
	return in.Spans[r.Span].Size / (float64(r.End-r.Start) * in.seconds())
}

// shares says whether run (of a job with the given lead, so its copy may be fetched from earliest on)
// reads item it's copy: when its window overlaps the item's runs' (the same data), or when it is due
// soon after them — before as long again as they have from the first run's start to their deadline
// — and the copy may still be fetched within its own lead before it, as a copy of its own would be,
// so it is never older than what its job's previous run saw, at the cost of at most half of the
// item's window for the prefetch. Else it needs a copy of its own, read after the item's first run
// began: a separate copy of the same data, read just after the first, would make two reads of what
// one copy holds, in the few slots between the two.
func shares(it Item, run Run, lead, earliest int) bool {
	switch {
	case run.Start < it.Until:
		return true
	case lead <= 0 || earliest >= it.First || run.Start >= 2*it.Until-it.First:
		return false
	}
	return 2*(it.First-max(it.Earliest, earliest)) >= it.First-it.Earliest
}

// Runs expands the jobs into their runs inside the horizon, in start order, and groups them into items.
func (in *Instance) Runs(opt Options) ([]Run, []Item) {
	spanIdx := make(map[string]int, len(in.Spans))
	for i, s := range in.Spans {
		spanIdx[s.ID] = i
	}
	var runs []Run
	for j, job := range in.Jobs {
		dur := job.Duration
		if dur == 0 {
			dur = job.Deadline
		}
		s := spanIdx[job.Span]
		for start := job.Start; start+job.Deadline <= in.Horizon; start += job.Period {
			runs = append(runs, Run{Job: j, Span: s, Node: in.Spans[s].Node, Start: start, End: start + dur,
				Deadline: start + job.Deadline})
			if job.Period == 0 {
				break
			}
		}
	}
	sort.SliceStable(runs, func(a, b int) bool {
		if runs[a].Start != runs[b].Start {
			return runs[a].Start < runs[b].Start
		}
		return runs[a].Job < runs[b].Job
	})
	var items []Item
	open := map[int]int{} // span → its latest item
	for r := range runs {
		run := &runs[r]
		lead := opt.Lead
		if lead == 0 {
			lead = in.Jobs[run.Job].Period
		}
		earliest := 0
		if lead > 0 {
			earliest = max(0, run.Start-lead)
		}
		if i, ok := open[run.Span]; ok && shares(items[i], *run, lead, earliest) {
			it := &items[i]
			if run.Start >= it.Until {
				it.Earliest = max(it.Earliest, earliest) // no older than a copy of its own
			}
			it.Runs = append(it.Runs, r)
			it.Until = max(it.Until, run.Deadline)
			it.Last = max(it.Last, run.End)
			run.Item = i
			continue
		}
		if i, ok := open[run.Span]; ok {
			// The copy for this run must not be fetched before the previous copy's runs began: it would
			// be the same data.
			earliest = max(earliest, items[i].First)
		}
		s := in.Spans[run.Span]
		items = append(items, Item{Span: run.Span, Node: s.Node, Size: s.Size, First: run.Start, Until: run.Deadline,
			Last: run.End, Earliest: earliest, Runs: []int{r}})
		run.Item = len(items) - 1
		open[run.Span] = run.Item
	}
	return runs, items
}

// Kind says what a transfer is for.
type Kind int

const (
	// Prefetch reads an item into the cache ahead of its first run.
	Prefetch Kind = iota
	// Read is a run reading its span from disk; with Until > End it also keeps a copy for later runs.
	Read
)

func (k Kind) String() string {
	if k == Prefetch {
		return "prefetch"
	}
	return "read"
}

// Transfer is one planned disk read at a constant rate over the slots [Start, End).
type Transfer struct {
	Kind Kind
	Item int
	Span string
	Node int
	Run  int // the run reading, for a Read; -1 for a Prefetch
	// Start and End bound the slots the transfer runs in; Rate·(End−Start)·slot is the span's size.
	Start, End int
	Rate       float64
	// Until is the slot the cached copy is released at. A copy fills the node's cache as its bytes
	// arrive over [Start, End) and holds all of them until Until. Until ≤ Start for a read that keeps
	// no copy.
	Until int
}

// rateAt is the bandwidth tr takes in slot t.
func (tr Transfer) rateAt(t int) float64 {
	if t >= tr.Start && t < tr.End {
		return tr.Rate
	}
	return 0
}

// Held is the bytes tr's copy holds in the cache at the end of slot t, for a span of size bytes.
func (tr Transfer) Held(size float64, t int) float64 {
	switch {
	case t < tr.Start || t >= tr.Until:
		return 0
	case t < tr.End:
		return size * float64(t-tr.Start+1) / float64(tr.End-tr.Start)
	default:
		return size
	}
}

// Source is where a run's data comes from.
type Source int

const (
	// FromDisk: the run's own Read.
	FromDisk Source = iota
	// FromCache: a copy a Prefetch or an earlier run's Read holds.
	FromCache
)

// Serve is how the schedule serves one run.
type Serve struct {
	Admitted bool
	Source   Source
	Transfer int // index in Schedule.Transfers; -1 when not admitted
}

// Verdict is the admission of one job: admitted only if every run of it in the horizon fits.
type Verdict struct {
	Job      string
	Admitted bool
	Reason   string // why not, when rejected
}

// Schedule is a strategy's plan for a window.
type Schedule struct {
	Strategy  Strategy
	Runs      []Run
	Items     []Item
	Transfers []Transfer
	Serves    []Serve // by run
	Verdicts  []Verdict
}

// Prefetches are the schedule's prefetch transfers.
func (s *Schedule) Prefetches() []Transfer {
	var out []Transfer
	for _, t := range s.Transfers {
		if t.Kind == Prefetch {
			out = append(out, t)
		}
	}
	return out
}

// Make plans in with strategy s.
func Make(in *Instance, s Strategy, opt Options) (Schedule, error) {
	if err := in.Validate(); err != nil {
		return Schedule{}, err
	}
	switch s {
	case Planner:
		return plan(in, opt), nil
	case DemandReads:
		return demandReads(in, opt), nil
	case DemandPaging:
		return demandPaging(in, opt), nil
	default:
		return Schedule{}, fmt.Errorf("prefetch: unknown strategy %d", int(s))
	}
}

package jobs

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/prefetch"
)

// Strategy is how the runs' reads meet the disks: what the scheduler asks of plan/prefetch.
type Strategy string

const (
	// DemandReads: every run reads its span from disk at its job's rate when it is due (no plan).
	DemandReads Strategy = "demand-reads"
	// DemandCaching: a run reading a span from disk keeps a copy while the cache has room, later runs
	// of the same data read the copy, idle copies are evicted largest first (PACMan's LIFE): the
	// chapter's DemandPaging, followed as plan/prefetch lays it out.
	DemandCaching Strategy = "demand-caching"
	// Planned: plan/prefetch's planner (NetCachier): spans read ahead into the cache at a constant
	// rate finishing at their first run, disk reads spread to their deadline, jobs whose reads no
	// longer fit refused.
	Planned Strategy = "planner"
)

// ParseStrategy checks a strategy's name (empty: demand reads).
func ParseStrategy(s string) (Strategy, error) {
	switch Strategy(s) {
	case "", DemandReads:
		return DemandReads, nil
	case DemandCaching, Planned:
		return Strategy(s), nil
	}
	return "", fmt.Errorf("jobs: unknown strategy %q (want %s, %s or %s)", s, DemandReads, DemandCaching, Planned)
}

func (s Strategy) solver() prefetch.Strategy {
	if s == DemandCaching {
		return prefetch.DemandPaging
	}
	return prefetch.Planner
}

// NodeLoad is what the plan needs of one live node, from its last load report.
type NodeLoad struct {
	ID uint64
	// ReadBytes counts the bytes of blocks the node's reads (its clients' and the jobs') loaded from
	// disk rather than its block cache, since it started.
	ReadBytes uint64
	// Leads maps the ranges it leads to their approximate bytes.
	Leads map[uint64]int64
}

// piece is the part of a job's span one range holds: the unit the plan reads, on the range's leader.
type piece struct {
	id         string
	rangeID    uint64
	start, end []byte // end empty: the keyspace's end
	node       uint64
	size       float64
}

func (p piece) holds(key []byte) bool {
	return bytes.Compare(key, p.start) >= 0 && (len(p.end) == 0 || bytes.Compare(key, p.end) < 0)
}

// pieceRead says where one run reads one piece from.
type pieceRead struct {
	piece
	copyKey string // a copy to read (prefetched, or kept by an earlier run); "" reads the disk
	keepKey string // a disk read that keeps a copy under this key for later runs
}

// runPlan is how one run (a job's due time) reads its span.
type runPlan struct {
	pieces []pieceRead
	// rate is the bytes/s of its disk reads (the sum of its pieces' planned rates); 0: the job's own.
	rate int64
}

func (rp *runPlan) at(key []byte) *pieceRead {
	if rp == nil {
		return nil
	}
	for i := range rp.pieces {
		if rp.pieces[i].holds(key) {
			return &rp.pieces[i]
		}
	}
	return nil
}

// fetchPlan is a planned prefetch: a piece read into the cache at a constant rate over [start, end).
type fetchPlan struct {
	key        string
	piece      piece
	start, end time.Time
	rate       float64
}

type runKey struct {
	job   string
	dueMs int64
}

// execPlan is a plan turned into what the scheduler and the runs follow.
type execPlan struct {
	made    time.Time
	sig     string            // the jobs' specs it was made for
	refused map[string]string // job → why its reads no longer fit
	runs    map[runKey]*runPlan
	fetches []fetchPlan
	release map[string]time.Time // copy → when it is released: the end of the last run reading it
	// wanted are the copies some run still to start reads (a run carried over from the last plan
	// may read an older copy than the one this plan would fetch for it).
	wanted map[string]bool
	// peak is the plan's highest planned disk bandwidth on one node in one slot (bytes/s); bound the
	// LP relaxation's least peak for the runs it admits (over blocks of slots: a looser bound), set
	// once by planBound.
	peak, bound float64
	boundOnce   sync.Once
	// need is, by node id, the most the plan asks of the node's disk in one slot (bytes/s), and
	// budgets the bandwidth each node's foreground left the jobs when it was made: a plan is redone
	// when a node's budget falls below its need, or rises by a tenth of the disk while jobs are refused.
	need, budgets map[uint64]float64
	// record is what the plan was made from, for its comparison with the slot-by-slot LP offline.
	record PlanRecord
}

// PlanRecord is one plan the scheduler made: when, its planner's input and the runs it admits (by
// the index of Instance.Runs), and its peak. Its LP bound slot by slot takes seconds, so it is not
// computed beside every plan: the scenario computes it after its measured window.
type PlanRecord struct {
	Made     time.Time          `json:"made"`
	Peak     float64            `json:"peak"`
	Instance *prefetch.Instance `json:"instance"`
	Admitted []bool             `json:"admitted"`
	Strategy Strategy           `json:"strategy"`
}

// planJob is one planner job: one piece of one scan job.
type planJob struct {
	job   *pb.ScanJob
	piece piece
	due   time.Time // its first run in the window
}

// makePlan plans the runs of jobs over the next horizon from now with the configured strategy. The
// carried runs (reading copies begun under the last plan, which they keep) are left out: a job's
// first run planned is the one after, and their copies' bytes are taken from the cache budget. Else
// the plan would read them again from disk in a slot or two (there is no time left to prefetch
// them), reads that never happen but set its peak.
func (s *Service) makePlan(ctx context.Context, jobs map[string]*pb.JobState, now time.Time, carried map[runKey]string) (*execPlan, error) {
	all, err := s.deps.Ranges.AllRanges(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan the scan jobs: read the ranges: %w", err)
	}
	loads := s.cluster()
	nodeIdx := map[uint64]int{}
	leader := map[uint64]uint64{}
	rangeBytes := map[uint64]int64{}
	slot := s.cfg.PlanSlot
	in := &prefetch.Instance{Slot: slot, Horizon: max(1, int(s.cfg.PlanHorizon/slot))}
	budgets := make(map[uint64]float64, len(loads))
	for i, l := range loads {
		nodeIdx[l.ID] = i
		for r, b := range l.Leads {
			leader[r], rangeBytes[r] = l.ID, b
		}
		budgets[l.ID] = s.budgetLeft(l, now)
		in.Nodes = append(in.Nodes, prefetch.Node{Bandwidth: []float64{budgets[l.ID]},
			Cache: float64(s.cfg.CacheBytes), Held: s.copies.heldFor(l.ID, now, carried, slot, in.Horizon),
			Base: s.copies.inFlight(l.ID, slot, in.Horizon)})
	}
	pjs := s.planJobs(ctx, in, jobs, all, nodeIdx, leader, rangeBytes, now, carried)
	if len(in.Nodes) == 0 || len(in.Jobs) == 0 {
		return &execPlan{made: now, refused: map[string]string{}, runs: map[runKey]*runPlan{}, budgets: budgets}, nil
	}
	sched, err := prefetch.Make(in, s.cfg.Strategy.solver(), prefetch.Options{})
	if err != nil {
		return nil, fmt.Errorf("plan the scan jobs: %w", err)
	}
	ep := follow(in, sched, pjs, now)
	if res, err := prefetch.Evaluate(in, &sched); err == nil {
		ep.peak = res.Peak
	}
	ep.need, ep.budgets = nodeNeeds(in, sched, loads), budgets
	// The LP's least peak for the runs this plan admits is not computed here: over blocks of slots it
	// still takes 75–150 ms of one core on the scenario's 36 jobs, on the scheduler's tick at every
	// plan, beside the foreground. Stats computes it for the current plan when asked (planBound).
	need := make([]bool, len(sched.Runs))
	for r, sv := range sched.Serves {
		need[r] = sv.Admitted
	}
	ep.record = PlanRecord{Made: now, Peak: ep.peak, Instance: in, Admitted: need, Strategy: s.cfg.Strategy}
	return ep, nil
}

// nodeNeeds is, by node id, the most disk bandwidth the schedule asks of the node in one slot, its
// base load included: the budget below which the plan no longer fits it (replan).
func nodeNeeds(in *prefetch.Instance, sched prefetch.Schedule, loads []NodeLoad) map[uint64]float64 {
	out := make(map[uint64]float64, len(loads))
	for n, l := range loads {
		slots := make([]float64, in.Horizon)
		for t := range slots {
			if b := in.Nodes[n].Base; t < len(b) {
				slots[t] = b[t]
			}
		}
		for _, tr := range sched.Transfers {
			if tr.Node != n {
				continue
			}
			for t := max(0, tr.Start); t < min(tr.End, in.Horizon); t++ {
				slots[t] += tr.Rate
			}
		}
		for _, v := range slots {
			out[l.ID] = max(out[l.ID], v)
		}
	}
	return out
}

// planBound is the LP relaxation's least peak (over blocks of slots) for the runs the current plan
// admits, computed once per plan when first asked for (0 without a plan, or if it cannot be had).
func (s *Service) planBound() float64 {
	s.mu.Lock()
	ep := s.plan
	s.mu.Unlock()
	if ep == nil || ep.record.Instance == nil {
		return 0
	}
	ep.boundOnce.Do(func() {
		if b, err := prefetch.LowerBound(ep.record.Instance, prefetch.Options{}, ep.record.Admitted); err == nil {
			ep.bound = b
		}
	})
	return ep.bound
}

// planJobs adds to in one planner job per piece of every job's span, and returns them in that order.
func (s *Service) planJobs(ctx context.Context, in *prefetch.Instance, jobs map[string]*pb.JobState, all []*pb.RangeDescriptor,
	nodeIdx map[uint64]int, leader map[uint64]uint64, rangeBytes map[uint64]int64, now time.Time, carried map[runKey]string) []planJob {
	var pjs []planJob
	slot := in.Slot
	spans := map[string]bool{}
	names := make([]string, 0, len(jobs))
	for n := range jobs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		job := jobs[name].Job
		start, end := job.Start, job.End
		if job.Table != "" {
			var err error
			if start, end, err = s.tableSpan(ctx, job.Table); err != nil {
				continue // the table is gone: its runs fail on their own
			}
		}
		due := nextDue(jobs[name], now)
		if _, ok := carried[runKey{name, due.UnixMilli()}]; ok && job.EveryMs > 0 {
			due = due.Add(time.Duration(job.EveryMs) * time.Millisecond)
		}
		pieces := s.pieces(all, start, end, leader, rangeBytes)
		total := 0.0
		for _, p := range pieces {
			total += p.size
		}
		rate := float64(job.RateBytes)
		if rate == 0 {
			rate = float64(s.cfg.RateBytes)
		}
		// A tenth of the deadline is kept back: a run starts up to a tick after its due time, and its
		// last page and its record come after its reads.
		deadline := max(1, int(time.Duration(job.DeadlineMs)*time.Millisecond*9/10/slot))
		dur := min(deadline, max(1, int(math.Ceil(total/rate/slot.Seconds()))))
		period := max(1, int(math.Round(float64(time.Duration(job.EveryMs)*time.Millisecond)/float64(slot))))
		first := max(0, int(due.Sub(now)/slot))
		for _, p := range pieces {
			if _, ok := nodeIdx[p.node]; !ok {
				continue // no live leader known: read on demand
			}
			if !spans[p.id] {
				spans[p.id] = true
				in.Spans = append(in.Spans, prefetch.Span{ID: p.id, Node: nodeIdx[p.node], Size: p.size})
			}
			in.Jobs = append(in.Jobs, prefetch.Job{Name: fmt.Sprintf("%s#%d", name, len(pjs)), Span: p.id, Start: first,
				Duration: dur, Deadline: deadline, Period: period})
			pjs = append(pjs, planJob{job: job, piece: p, due: due})
		}
	}
	return pjs
}

// follow turns a schedule into the runs' and prefetches' instructions in wall-clock time.
func follow(in *prefetch.Instance, sched prefetch.Schedule, pjs []planJob, now time.Time) *execPlan {
	ep := &execPlan{made: now, refused: map[string]string{}, runs: map[runKey]*runPlan{}, release: map[string]time.Time{}}
	at := func(slot int) time.Time { return now.Add(time.Duration(slot) * in.Slot) }
	for j, v := range sched.Verdicts {
		if name := pjs[j].job.Name; !v.Admitted && ep.refused[name] == "" {
			ep.refused[name] = v.Reason
		}
	}
	dueOf := func(r prefetch.Run) time.Time {
		pj, job := pjs[r.Job], in.Jobs[r.Job]
		k := 0
		if job.Period > 0 {
			k = (r.Start - job.Start) / job.Period
		}
		return pj.due.Add(time.Duration(k) * time.Duration(pj.job.EveryMs) * time.Millisecond)
	}
	copyKey := func(item int) string {
		it := sched.Items[item]
		return fmt.Sprintf("%s@%d", in.Spans[it.Span].ID, dueOf(sched.Runs[it.Runs[0]]).UnixMilli())
	}
	for r, run := range sched.Runs {
		pj := pjs[run.Job]
		serve := sched.Serves[r]
		if !serve.Admitted || ep.refused[pj.job.Name] != "" {
			continue
		}
		key := runKey{pj.job.Name, dueOf(run).UnixMilli()}
		rp := ep.runs[key]
		if rp == nil {
			rp = &runPlan{}
			ep.runs[key] = rp
		}
		tr := sched.Transfers[serve.Transfer]
		pr := pieceRead{piece: pj.piece}
		ck := copyKey(run.Item)
		switch {
		case serve.Source == prefetch.FromCache:
			pr.copyKey = ck
			ep.release[ck] = at(tr.Until)
		default:
			rp.rate += int64(math.Ceil(tr.Rate))
			if tr.Until > tr.End {
				pr.keepKey = ck
				ep.release[ck] = at(tr.Until)
			}
		}
		rp.pieces = append(rp.pieces, pr)
	}
	for _, tr := range sched.Prefetches() {
		it := sched.Items[tr.Item]
		ep.fetches = append(ep.fetches, fetchPlan{key: copyKey(tr.Item), piece: pjs[sched.Runs[it.Runs[0]].Job].piece,
			start: at(tr.Start), end: at(tr.End), rate: tr.Rate})
	}
	return ep
}

// copyFirstDue is the due time of the first run of the copy under key ("<piece>@<unix ms>").
func copyFirstDue(key string) time.Time {
	ms, err := strconv.ParseInt(key[strings.LastIndexByte(key, '@')+1:], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// nextDue is the due time of a job's next run not yet started.
func nextDue(st *pb.JobState, now time.Time) time.Time {
	due := time.UnixMilli(st.Job.CreatedUnixMs)
	if st.NextDueUnixMs > 0 {
		due = time.UnixMilli(st.NextDueUnixMs)
	}
	if every := time.Duration(st.Job.EveryMs) * time.Millisecond; every > 0 && due.Before(now) {
		due = due.Add(time.Duration(now.Sub(due)/every) * every)
	}
	return due
}

// pieces cuts [start, end) at the ranges' bounds, each piece sized by what a run last read of it or
// else by its range's size (an upper bound when the span covers part of the range).
func (s *Service) pieces(all []*pb.RangeDescriptor, start, end []byte, leader map[uint64]uint64, rangeBytes map[uint64]int64) []piece {
	var out []piece
	for _, d := range all {
		if (len(d.EndKey) > 0 && bytes.Compare(d.EndKey, start) <= 0) || (len(end) > 0 && bytes.Compare(d.StartKey, end) >= 0) {
			continue
		}
		p := piece{rangeID: d.RangeId, start: maxKey(d.StartKey, start), end: minEnd(d.EndKey, end), node: leader[d.RangeId]}
		p.id = fmt.Sprintf("r%d:%x-%x", d.RangeId, p.start, p.end)
		s.mu.Lock()
		known, ok := s.sizes[p.id]
		s.mu.Unlock()
		p.size = float64(rangeBytes[d.RangeId])
		if ok {
			p.size = known
		}
		p.size = max(p.size, 4096)
		out = append(out, p)
	}
	return out
}

func maxKey(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

// budgetLeft is the disk bandwidth node l's foreground leaves the jobs: the disk's bandwidth less the
// rate its reads missed the block cache at, the jobs' own reads (runs and prefetches) taken out. The
// disk's busy share is no measure here: a run's paced reads queue on the device and make it look
// saturated whatever their rate.
func (s *Service) budgetLeft(l NodeLoad, now time.Time) float64 {
	disk := float64(s.cfg.DiskBytesPerSec)
	fg := max(0, s.copies.loadRate(l.ID, l.ReadBytes, now)-s.jobRate(l.ID, now))
	return max(0, disk-fg) * s.cfg.DiskShare
}

// signature names the jobs' specs a plan was made for: a change of them re-plans at once.
func signature(jobs map[string]*pb.JobState) string {
	var b strings.Builder
	names := make([]string, 0, len(jobs))
	for n := range jobs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		j := jobs[n].Job
		fmt.Fprintf(&b, "%s/%d/%d/%d/%d;", n, j.CreatedUnixMs, j.EveryMs, j.DeadlineMs, j.RateBytes)
	}
	return b.String()
}

// budgetsMoved says whether the nodes' budgets moved enough since ep was made to plan again: a node
// whose budget fell below what ep asks of its disk in some slot (the plan no longer fits it), a node
// that joined or left, or, while ep refuses jobs, a budget risen by a tenth of the disk (they may fit
// now). Budgets that move a little all the time while the plan fits them leave it be: each plan costs
// CPU beside the foreground, and the plan they would give places the same prefetches.
func (s *Service) budgetsMoved(ep *execPlan, now time.Time) bool {
	loads := s.cluster()
	if len(loads) != len(ep.budgets) {
		return true
	}
	tenth := float64(s.cfg.DiskBytesPerSec) / 10
	for _, l := range loads {
		was, ok := ep.budgets[l.ID]
		if !ok {
			return true
		}
		cur := s.budgetLeft(l, now)
		if cur < ep.need[l.ID] || (len(ep.refused) > 0 && cur >= was+tenth) {
			return true
		}
	}
	return false
}

func (s *Service) cluster() []NodeLoad {
	if s.deps.Cluster == nil {
		return nil
	}
	ls := s.deps.Cluster()
	sort.Slice(ls, func(a, b int) bool { return ls[a].ID < ls[b].ID })
	return ls
}

// releaseOf is when the plan releases the copy under key: its planned release, else the end of the
// plan's horizon.
func (ep *execPlan) releaseOf(key string, horizon time.Duration) time.Time {
	if ep == nil {
		return time.Now().Add(horizon)
	}
	if t, ok := ep.release[key]; ok {
		return t
	}
	return ep.made.Add(horizon)
}

// Package jobs runs the cluster's scan jobs: recurring reads of a key span or a table's rows that must
// be done a deadline after each due time, each run counting the rows or exporting them to a file. It
// owns the jobs' records in the meta range (under node/records' job keys: the spec, and the state its
// runs leave — the run in progress with its progress, the last outcomes, the next due time), the
// schedule (schedule.go: which run is due, on time or late, never two at once), and the runs this node
// carries out.
//
// Only the node leading the meta range schedules, as the autopilot's host does: a new leader picks the
// jobs up from the meta range, and a run whose node stopped recording progress is abandoned and the
// job runs again. A run reads its span range by range through the range layer's ordinary reads (each
// page served by the range's leader, with its admission and read barrier), paced at a rate.
//
// It must never write user data, never read the engine directly, never start a run of a job while
// another run of it is going, and never run a job on a node that does not lead the meta range. It owns
// its goroutines (the ticker and one per running run), all stopped by Stop.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stopper"
)

// Config tunes the scheduler and the runs. Zero fields take the defaults.
type Config struct {
	// Tick is how often the meta range's leader looks for due runs (default 250ms): a run starts up to
	// a tick after its due time.
	Tick time.Duration
	// RateBytes paces a run's reads, in bytes of keys and values per second, unless the job sets its
	// own (default 32 MiB/s).
	RateBytes int64
	// PageRows is the rows a run reads per request (default 1000).
	PageRows int
	// ProgressEvery is how often a running run records its progress in the meta range (default 1s).
	ProgressEvery time.Duration
	// StaleAfter: a run whose node recorded no progress for this long is abandoned, and the job runs
	// again from the meta range's leader (default 5s).
	StaleAfter time.Duration
	// KeepRuns is how many finished runs a job's state keeps (default 10).
	KeepRuns int
	// Off stops this node from running jobs (the jobs stay stored; another node leading the meta
	// range runs them).
	Off bool

	// Strategy is how runs meet the disks (default demand reads): see Strategy.
	Strategy Strategy
	// PlanSlot is the planner's time step (default 1m); PlanHorizon how far ahead it plans (default
	// 2h); ReplanEvery how often it plans again when neither the jobs nor the nodes' budgets changed
	// (default 10 slots).
	PlanSlot, PlanHorizon, ReplanEvery time.Duration
	// DiskBytesPerSec is a node's disk read bandwidth the plan shares out (default 200 MiB/s), and
	// DiskShare the part of what the foreground leaves that the jobs may take (default 1).
	DiskBytesPerSec int64
	DiskShare       float64
	// CacheBytes is, per node, the bytes of copies of spans the scheduler may hold for the runs
	// (default 64 MiB).
	CacheBytes int64
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if c.Tick == 0 {
		c.Tick = 250 * time.Millisecond
	}
	if c.RateBytes == 0 {
		c.RateBytes = 32 << 20
	}
	if c.PageRows == 0 {
		c.PageRows = 1000
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = time.Second
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = 5 * time.Second
	}
	if c.KeepRuns == 0 {
		c.KeepRuns = 10
	}
	if c.Strategy == "" {
		c.Strategy = DemandReads
	}
	if c.PlanSlot == 0 {
		c.PlanSlot = time.Minute
	}
	if c.PlanHorizon == 0 {
		c.PlanHorizon = 2 * time.Hour
	}
	if c.ReplanEvery == 0 {
		c.ReplanEvery = 10 * c.PlanSlot
	}
	if c.DiskBytesPerSec == 0 {
		c.DiskBytesPerSec = 200 << 20
	}
	if c.DiskShare == 0 {
		c.DiskShare = 1
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = 64 << 20
	}
	return c
}

// Validate rejects negative settings, and a staleness shorter than the progress interval (every run
// would look abandoned).
func (c Config) Validate() error {
	if c.Tick < 0 || c.RateBytes < 0 || c.PageRows < 0 || c.ProgressEvery < 0 || c.StaleAfter < 0 || c.KeepRuns < 0 {
		return errors.New("jobs: tick, rate, page rows, progress interval, staleness and kept runs must not be negative")
	}
	if _, err := ParseStrategy(string(c.Strategy)); err != nil {
		return err
	}
	if c.PlanSlot < 0 || c.PlanHorizon < 0 || c.ReplanEvery < 0 || c.DiskBytesPerSec < 0 || c.DiskShare < 0 || c.DiskShare > 1 || c.CacheBytes < 0 {
		return errors.New("jobs: plan slot, horizon, re-plan interval, disk bandwidth and cache must not be negative, the disk share within 0..1")
	}
	if c.StaleAfter > 0 && c.ProgressEvery > 0 && c.StaleAfter <= 2*c.ProgressEvery {
		return fmt.Errorf("jobs: stale-after %v must exceed twice the progress interval %v", c.StaleAfter, c.ProgressEvery)
	}
	return nil
}

// Ranges is what the jobs need of the range layer (kv.Service implements it): the meta range, the
// routing of a key to its range, and the ordinary scan of one range on its leader.
type Ranges interface {
	records.MetaStore
	LookupRange(ctx context.Context, key []byte) (*pb.RangeDescriptor, error)
	AllRanges(ctx context.Context) ([]*pb.RangeDescriptor, error)
	OnLeader(ctx context.Context, rangeID uint64, local func(*replica.Replica) error,
		remote func(context.Context, pb.ShoalClient) (*pb.Error, error)) error
	Scan(ctx context.Context, req *pb.ScanRequest) (*pb.ScanResponse, error)
}

// Deps are the node's parts the jobs use.
type Deps struct {
	Ranges Ranges
	// Store is the node's replica store (nil before the node starts): whether it leads the meta range,
	// and its id.
	Store  func() *replica.Store
	Logger *slog.Logger
	// Cluster reports the live nodes' loads for the prefetch plan (nil: no plan, runs read on demand).
	Cluster func() []NodeLoad
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Stats counts this node's runs since it started (the metrics endpoint).
type Stats struct {
	OnTime, Late, Failed, Abandoned uint64
	Rows, Bytes                     uint64
	Running                         int
	// Refused counts due times the plan refused; Prefetches the copies begun, PrefetchBytes the bytes
	// they read; CacheBytes the bytes runs read from copies; Held the bytes copies hold now.
	Refused, Prefetches, PrefetchBytes, CacheBytes uint64
	Held                                           int64
	// PlanPeak is the last plan's highest disk bandwidth on one node (bytes/s), PlanBound the LP
	// relaxation's least peak for the runs it admits.
	PlanPeak, PlanBound float64
	// DiskReads are the bytes (of keys and values) the runs and prefetches this node led read from
	// each node's disk, by node id: pieces under a plan only (demand reads are not split by node).
	DiskReads map[uint64]DiskReads
	// CopiesShort counts the copies cut short, by why (budget: dropped over the copies' budget;
	// prefetch_failed; keeper_failed: the run keeping it failed; released_unfinished: released at its
	// time, unfinished, with no run reading it), and the runs that read from disk what their plan
	// served from a copy (gone: the copy was not there; stalled: it stopped growing for StaleAfter).
	CopiesShort map[string]uint64
	// Plans are the last plans this node made (at most keepPlans, oldest first; shared, read only).
	Plans []PlanRecord
}

// keepPlans is how many plans' records Stats keeps.
const keepPlans = 64

// DiskReads splits the jobs' reads of one node's disk: by prefetches, and by runs.
type DiskReads struct{ Prefetch, Run uint64 }

// Service is one node's part of the scan jobs: the RPCs on any node, the scheduler and runs on the
// meta range's leader.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	stop *stopper.Stopper

	// whoami says which node this is and whether it leads the meta range (tests replace it).
	whoami func() (node uint64, leadsMeta bool)

	mu      sync.Mutex
	running map[string]context.CancelFunc // runs going on this node, by job
	plan    *execPlan                     // the strategy's current plan (nil: none yet, or demand reads)
	plans   []PlanRecord                  // the last plans made, oldest first
	sizes   map[string]float64            // piece → the bytes a run or prefetch last read of it

	copies *sideCache
	// turns: one prefetch page at a time on each node's disk (pace.go).
	turns diskTurns

	onTime, late, failed, abandoned, rows, bytes   atomic.Uint64
	refused, prefetches, prefetchBytes, cacheBytes atomic.Uint64
}

// New prepares the jobs of a node; nothing runs until Start.
func New(cfg Config, deps Deps) *Service {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	s := &Service{cfg: cfg.WithDefaults(), deps: deps, log: deps.Logger, stop: stopper.New(), running: map[string]context.CancelFunc{},
		sizes: map[string]float64{}}
	s.copies = newSideCache(s.cfg.CacheBytes)
	s.whoami = s.fromStore
	return s
}

// Start runs the scheduler until Stop.
func (s *Service) Start() {
	if s.cfg.Off {
		return
	}
	s.stop.Every(s.cfg.Tick, s.tick)
}

// Stop ends the scheduler and the runs going on this node, and waits for them. A stopped run's
// record stays "running" until another node finds it abandoned and runs the job again.
func (s *Service) Stop() { s.stop.Stop() }

// Stats reads the counters, the current plan's peak and LP bound (computed once per plan when first
// asked for: tens of milliseconds of CPU) and the last plans.
func (s *Service) Stats() Stats {
	st := s.Counters()
	s.mu.Lock()
	if s.plan != nil {
		st.PlanPeak = s.plan.peak
	}
	st.Plans = slices.Clone(s.plans)
	s.mu.Unlock()
	st.PlanBound = s.planBound()
	return st
}

// Counters reads the counters alone (Stats without the plan's figures): cheap enough to sample every
// second.
func (s *Service) Counters() Stats {
	s.mu.Lock()
	n := len(s.running)
	s.mu.Unlock()
	return Stats{OnTime: s.onTime.Load(), Late: s.late.Load(), Failed: s.failed.Load(), Abandoned: s.abandoned.Load(),
		Rows: s.rows.Load(), Bytes: s.bytes.Load(), Running: n, Refused: s.refused.Load(), Prefetches: s.prefetches.Load(),
		PrefetchBytes: s.prefetchBytes.Load(), CacheBytes: s.cacheBytes.Load(), Held: s.copies.held(),
		DiskReads: s.copies.diskReads(), CopiesShort: s.copies.shortCounts()}
}

func (s *Service) fromStore() (uint64, bool) {
	st := s.deps.Store()
	if st == nil {
		return 0, false
	}
	r := st.Replica(replica.MetaRangeID)
	return st.NodeID(), r != nil && r.IsLeader()
}

// tick starts the runs that are due, on the meta range's leader only.
func (s *Service) tick(ctx context.Context) {
	self, leads := s.whoami()
	if !leads {
		return
	}
	// The scheduler's reads of the meta range (the jobs, the ranges) are the jobs' too, not the
	// foreground's, in the engine's block accounting.
	ctx = kv.JobRead(ctx)
	// A run records its outcome, then leaves s.running: the runs going before the read count as
	// going this tick, since the states read may predate their outcomes (busy).
	s.mu.Lock()
	ranAtRead := make(map[string]bool, len(s.running))
	for name := range s.running {
		ranAtRead[name] = true
	}
	s.mu.Unlock()
	jobs, err := s.load(ctx, "")
	if err != nil {
		s.log.Debug("jobs: read the jobs from the meta range", "err", err)
		return
	}
	now := s.deps.Now()
	ep := s.replan(ctx, jobs, now)
	s.mu.Lock()
	for name, cancel := range s.running {
		if _, ok := jobs[name]; !ok {
			cancel() // removed while it ran
		}
	}
	s.mu.Unlock()
	for name, st := range jobs {
		s.mu.Lock()
		_, mine := s.running[name]
		s.mu.Unlock()
		busy := runGoing(mine, ranAtRead[name], st.Running, self, now, s.cfg.StaleAfter)
		var next time.Time
		if st.NextDueUnixMs > 0 {
			next = time.UnixMilli(st.NextDueUnixMs)
		}
		d := Decide(st.Job, next, busy, now)
		verdict := admission(ep, name)
		var rp *runPlan
		if ep != nil && d.Start {
			rp = ep.runs[runKey{name, d.Due.UnixMilli()}]
		}
		switch {
		case !d.Start:
			if !busy && st.Running == nil && st.Admission != verdict {
				st.Admission = verdict
				if err := s.saveState(ctx, st); err != nil {
					s.log.Debug("jobs: could not record an admission", "job", name, "err", err)
				}
			}
		case verdict != "" && verdict != admitted && rp == nil:
			// A refused job's run is planned only when it reads a copy begun for it (keepBegun).
			s.refuse(ctx, st, d, verdict)
		default:
			st.Admission = verdict
			s.start(ctx, self, st, d, now, rp)
		}
	}
	if ep != nil {
		s.startFetches(ctx, ep, now)
	}
	s.copies.sweep(now)
}

const admitted = "admitted"

// admission is the plan's verdict on a job: "" without a plan, "admitted", or why it was refused.
func admission(ep *execPlan, name string) string {
	switch {
	case ep == nil:
		return ""
	case ep.refused[name] != "":
		return ep.refused[name]
	default:
		return admitted
	}
}

// replan returns the plan to follow: the current one, or a new one when the jobs changed, the nodes'
// budgets moved out of what it needs (budgetsMoved) or ReplanEvery passed. Demand reads follow none.
func (s *Service) replan(ctx context.Context, jobs map[string]*pb.JobState, now time.Time) *execPlan {
	if s.cfg.Strategy == DemandReads || s.deps.Cluster == nil {
		return nil
	}
	specs := signature(jobs)
	s.mu.Lock()
	cur := s.plan
	s.mu.Unlock()
	// The budgets' readings move all the time: a move out of the plan's needs re-plans no more often
	// than every few slots, a change of the jobs at once.
	if cur != nil && cur.sig == specs && now.Sub(cur.made) < s.cfg.ReplanEvery &&
		(now.Sub(cur.made) < 4*s.cfg.PlanSlot || !s.budgetsMoved(cur, now)) {
		return cur
	}
	ep, err := s.makePlan(ctx, jobs, now, s.carried(cur, now))
	if err != nil {
		s.log.Warn("jobs: could not plan the scan jobs' reads; following the last plan", "err", err)
		return cur
	}
	ep.sig = specs
	s.keepBegun(cur, ep, now)
	ep.wanted = map[string]bool{}
	for _, rp := range ep.runs {
		for _, p := range rp.pieces {
			if p.copyKey != "" {
				ep.wanted[p.copyKey] = true
			}
		}
	}
	for k, t := range ep.release {
		s.copies.extend(k, t)
	}
	s.mu.Lock()
	s.plan = ep
	if ep.record.Instance != nil {
		s.plans = append(s.plans, ep.record)
		if len(s.plans) > keepPlans {
			s.plans = slices.Delete(s.plans, 0, len(s.plans)-keepPlans)
		}
	}
	s.mu.Unlock()
	s.log.Debug("jobs: planned the scan jobs' reads", "strategy", s.cfg.Strategy, "prefetches", len(ep.fetches),
		"refused", len(ep.refused), "peak_bytes_per_sec", int64(ep.peak))
	return ep
}

// keepBegun carries over from the last plan the runs still to start that read a copy already begun:
// a new plan, made from now, would group them anew (a run whose first reader started is the first of
// a new item there) and read them from disk while the copy meant for them is held, or refuse their
// job for want of the bandwidth to read it by then (the run still reads its copy; the refusal holds
// for the job's later runs). The new plan was made without them (makePlan).
func (s *Service) keepBegun(cur, ep *execPlan, now time.Time) {
	for k, key := range s.carried(cur, now) {
		ep.runs[k] = cur.runs[k]
		if t, ok := cur.release[key]; ok && t.After(ep.release[key]) {
			ep.release[key] = t
		}
	}
}

// carried are the runs of the last plan still to start that read a copy already begun, with that
// copy's key: they keep their instructions across a re-plan.
func (s *Service) carried(cur *execPlan, now time.Time) map[runKey]string {
	out := map[runKey]string{}
	if cur == nil {
		return out
	}
	for k, rp := range cur.runs {
		if k.dueMs < now.Add(-s.cfg.Tick).UnixMilli() {
			continue // started already
		}
		for _, p := range rp.pieces {
			if p.copyKey != "" && s.copies.begun(p.copyKey) {
				out[k] = p.copyKey
				break
			}
		}
	}
	return out
}

// refuse passes a due time the plan refused: no run, the reason recorded in the job's state.
func (s *Service) refuse(ctx context.Context, st *pb.JobState, d Decision, why string) {
	st.NextDueUnixMs = d.Next.UnixMilli()
	st.Skipped += d.Skipped
	st.Refused++
	st.Admission = why
	s.refused.Add(1)
	if err := s.saveState(ctx, st); err != nil {
		s.log.Warn("jobs: could not record a refused run", "job", st.Job.Name, "err", err)
	}
}

// start records a run of st's job as running on this node and starts it.
func (s *Service) start(ctx context.Context, self uint64, st *pb.JobState, d Decision, now time.Time, rp *runPlan) {
	name := st.Job.Name
	if old := st.Running; old != nil {
		old.Error = fmt.Sprintf("abandoned: node %d recorded no progress after %s", old.NodeId, time.UnixMilli(old.ProgressUnixMs).UTC().Format(time.RFC3339))
		old.FinishedUnixMs = now.UnixMilli()
		s.finish(st, old)
		s.abandoned.Add(1)
	}
	st.Running = &pb.JobRun{DueUnixMs: d.Due.UnixMilli(), StartedUnixMs: now.UnixMilli(), ProgressUnixMs: now.UnixMilli(), NodeId: self}
	st.NextDueUnixMs = d.Next.UnixMilli()
	st.Skipped += d.Skipped
	if err := s.saveState(ctx, st); err != nil {
		s.log.Warn("jobs: could not record the start of a run", "job", name, "err", err)
		return
	}
	runCtx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.running[name] = cancel
	s.mu.Unlock()
	st = proto.Clone(st).(*pb.JobState)
	// runCtx comes from the scheduler's context, which Stop cancels.
	s.stop.Go(func(context.Context) {
		defer cancel()
		s.run(runCtx, st, rp)
		s.mu.Lock()
		delete(s.running, name)
		s.mu.Unlock()
	})
}

// finish moves run into st's last outcomes.
func (s *Service) finish(st *pb.JobState, run *pb.JobRun) {
	st.Runs++
	if !run.OnTime {
		st.Late++
	}
	st.Last = append([]*pb.JobRun{run}, st.Last...)
	if len(st.Last) > s.cfg.KeepRuns {
		st.Last = st.Last[:s.cfg.KeepRuns]
	}
}

// load reads the jobs (one when name is set) with their states from the meta range.
func (s *Service) load(ctx context.Context, name string) (map[string]*pb.JobState, error) {
	start, end := records.JobSpan()
	sStart, sEnd := records.JobStateSpan()
	if name != "" {
		start, end = records.JobKey(name), append(records.JobKey(name), 0)
		sStart, sEnd = records.JobStateKey(name), append(records.JobStateKey(name), 0)
	}
	specs, err := s.deps.Ranges.ScanMeta(ctx, start, end, 0)
	if err != nil {
		return nil, fmt.Errorf("read the scan jobs from the meta range: %w", err)
	}
	out := make(map[string]*pb.JobState, len(specs))
	if len(specs) == 0 {
		return out, nil
	}
	states, err := s.deps.Ranges.ScanMeta(ctx, sStart, sEnd, 0)
	if err != nil {
		return nil, fmt.Errorf("read the scan jobs' states from the meta range: %w", err)
	}
	for _, kv := range specs {
		job := &pb.ScanJob{}
		if err := proto.Unmarshal(kv.Value, job); err != nil {
			return nil, fmt.Errorf("decode scan job %q: %w", records.JobName(kv.Key), err)
		}
		out[job.Name] = &pb.JobState{Job: job}
	}
	for _, kv := range states {
		st := out[records.JobName(kv.Key)]
		if st == nil {
			continue // a removed job's leftover
		}
		saved := &pb.JobState{}
		if err := proto.Unmarshal(kv.Value, saved); err != nil {
			return nil, fmt.Errorf("decode the state of scan job %q: %w", st.Job.Name, err)
		}
		if saved.Job.GetCreatedUnixMs() != st.Job.CreatedUnixMs {
			continue // left by an earlier job of the same name
		}
		saved.Job = st.Job
		out[st.Job.Name] = saved
	}
	return out, nil
}

// saveState writes st (its spec included, so that a state outliving a removal and re-add of its name
// is recognised by the spec's creation time).
func (s *Service) saveState(ctx context.Context, st *pb.JobState) error {
	b, err := proto.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := s.deps.Ranges.ProposeMeta(ctx, &pb.Command{Mutations: []*pb.Mutation{{Key: records.JobStateKey(st.Job.Name), Value: b}}}); err != nil {
		return fmt.Errorf("record the state of scan job %q: %w", st.Job.Name, err)
	}
	return nil
}

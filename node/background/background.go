// Package background owns a node's background work: it tracks the engine's compactions and flushes,
// backups and announced maintenance in a bgtask.Tracker (reported in heartbeats), runs manual and
// periodic compactions and backups, and makes a heavy task this node starts wait at the tracker's gate
// while the autopilot's shed_leadership policy moves the node's leaderships to idle voters.
//
// A heavy task this node starts itself (a manual compaction, a backup, an announcement) waits, pending,
// until no leadership is left that could move, the policy is off, or Config.MaxPostpone passes.
// Automatic compactions cannot wait (Pebble starts them); a big one is reported as a running heavy
// task, and the policy sheds reactively.
//
// It never moves a leadership itself (the autopilot does, through operators) and never writes
// replicated data.
package background

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/node/backups"
	"github.com/shoaldb/shoal/node/directory"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/quorumrisk"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage"
)

// Config configures background work; zero values take defaults.
type Config struct {
	// HeavyCompactionBytes, MaxPostpone, ReturnWindow: see bgtask.Config.
	bgtask.Config
	// CompactInterval runs a full compaction periodically (each period drawn from [T, 1.5T], the
	// first at a random offset, so that replicas do not align); 0: never.
	CompactInterval time.Duration
	// BackupInterval writes a backup into BackupDir/backup-<unix seconds> periodically (jittered as
	// CompactInterval); 0: never.
	BackupInterval time.Duration
	BackupDir      string
	// BackupRateBytesPerSec limits periodic backups (0: unlimited).
	BackupRateBytesPerSec int64
	// Backup configures the backups themselves (the change journal incrementals read).
	Backup backups.Config
}

// WithDefaults returns c with the tracker's defaults filled in.
func (c Config) WithDefaults() Config {
	c.Config = c.Config.WithDefaults()
	return c
}

// Validate reports every inconsistent setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.MaxPostpone < 0 || c.CompactInterval < 0 || c.BackupInterval < 0 {
		errs = append(errs, errors.New("background durations must not be negative"))
	}
	if c.BackupInterval > 0 && !filepath.IsAbs(c.BackupDir) {
		errs = append(errs, fmt.Errorf("a backup interval needs an absolute --backup-dir (got %q)", c.BackupDir))
	}
	if c.BackupRateBytesPerSec < 0 {
		errs = append(errs, fmt.Errorf("backup rate must not be negative (got %d)", c.BackupRateBytesPerSec))
	}
	return errors.Join(errs...)
}

// Ranges is what background work needs of the range layer (kv.Service implements it).
type Ranges interface {
	records.MetaStore
	// WaitAppliedLocal waits until this node's replica of rangeID has applied index.
	WaitAppliedLocal(ctx context.Context, rangeID, index uint64) (uint64, error)
}

// Deps are the node's parts background work uses.
type Deps struct {
	Engine *storage.Engine
	// Store returns the node's replica store (nil before the node started).
	Store  func() *replica.Store
	Ranges Ranges
	Dir    *directory.Directory
	// Peer returns a client of another node (by id) for requests meant for it.
	Peer func(nodeID uint64) (pb.ShoalClient, error)
	// LiveWindow is how recently a node must have been heard from to count as live.
	LiveWindow func() time.Duration
	// Kick asks the node to send a heartbeat now (a heavy task appeared or ended).
	Kick func()
	// DrainLeaderships hands every leadership of this node to a peer and waits until none is left
	// or ctx ends; it returns how many are left. The node stays draining until it stops (PreStopTask).
	DrainLeaderships func(ctx context.Context) int
	Logger           *slog.Logger
}

// Service is one node's background work.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	t    *bgtask.Tracker

	ledNow atomic.Pointer[[]uint64] // ranges led at the last stats reading (for the tracker's hooks)

	annMu      sync.Mutex
	announced  map[string]*bgtask.Handle // running maintenance announcements by task name
	preStopped atomic.Bool               // PreStopTask was announced: the node is about to stop

	nodeID    atomic.Uint64
	clusterID atomic.Pointer[string]

	loops *stopper.Stopper // the periodic compactions and backups
}

// New creates the tracker and hooks the engine to it. Nothing runs until Start.
func New(cfg Config, deps Deps) *Service {
	cfg = cfg.WithDefaults()
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	s := &Service{cfg: cfg, deps: deps, log: deps.Logger, announced: map[string]*bgtask.Handle{}, loops: stopper.New()}
	s.t = bgtask.NewTracker(cfg.Config, nil)
	empty := []uint64{}
	s.ledNow.Store(&empty)
	cid := ""
	s.clusterID.Store(&cid)
	// The hooks run on Pebble's goroutines: they must not take replica locks, so the ranges this node
	// leads come from the last heartbeat's reading.
	s.t.SetHooks(func() []uint64 { return *s.ledNow.Load() }, deps.Kick)
	deps.Engine.SetBackgroundListener(&engineTasks{t: s.t, jobs: map[int]*bgtask.Handle{}})
	return s
}

// Tracker is the node's background-task tracker (status pages and tests).
func (s *Service) Tracker() *bgtask.Tracker { return s.t }

// Start runs the configured periodic compactions and backups once the node knows who it is.
func (s *Service) Start(nodeID uint64, clusterID string) {
	s.nodeID.Store(nodeID)
	s.clusterID.Store(&clusterID)
	s.removeStaleCheckpoints(s.deps.Engine, s.log)
	bc := s.cfg
	s.periodic(bc.CompactInterval, "full compaction", func(ctx context.Context) error {
		_, err := s.runCompaction(ctx)
		return err
	})
	s.periodic(bc.BackupInterval, "backup", func(ctx context.Context) error {
		if bc.BackupDir == "" {
			return fmt.Errorf("backup interval set without a backup directory")
		}
		dir := filepath.Join(bc.BackupDir, fmt.Sprintf("backup-%d", time.Now().Unix()))
		_, _, err := s.runBackup(ctx, dir, nil, bc.BackupRateBytesPerSec)
		return err
	})
}

// Stop ends the periodic tasks (a running one is cancelled).
func (s *Service) Stop() { s.loops.Stop() }

// Notify wakes heavy tasks waiting at the gate: a peer's status changed, so an idle candidate may exist.
func (s *Service) Notify() { s.t.Notify() }

// periodic runs run about every base, jittered per node, until Stop.
func (s *Service) periodic(base time.Duration, what string, run func(ctx context.Context) error) {
	if base <= 0 {
		return
	}
	s.loops.Go(func(ctx context.Context) {
		rng := rand.New(rand.NewPCG(s.nodeID.Load(), uint64(time.Now().UnixNano())))
		for wait := bgtask.FirstDelay(base, rng); s.loops.Sleep(wait); wait = bgtask.Jittered(base, rng) {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("periodic background task failed", "task", what, "err", err)
			}
		}
	})
}

// engineTasks turns the engine's compaction and flush events into tracked tasks.
type engineTasks struct {
	t    *bgtask.Tracker
	mu   sync.Mutex
	jobs map[int]*bgtask.Handle
}

func (e *engineTasks) begin(job int, h *bgtask.Handle) {
	e.mu.Lock()
	e.jobs[job] = h
	e.mu.Unlock()
}

func (e *engineTasks) end(job int) {
	e.mu.Lock()
	h := e.jobs[job]
	delete(e.jobs, job)
	e.mu.Unlock()
	h.End()
}

func (e *engineTasks) CompactionBegin(job int, inputBytes uint64, reason string) {
	e.begin(job, e.t.Begin(bgtask.KindCompaction, fmt.Sprintf("job %d (%s)", job, reason), inputBytes))
}
func (e *engineTasks) CompactionEnd(job int) { e.end(job) }
func (e *engineTasks) FlushBegin(job int, bytes uint64) {
	e.begin(-job-1, e.t.Begin(bgtask.KindFlush, fmt.Sprintf("job %d", job), bytes))
}
func (e *engineTasks) FlushEnd(job int) { e.end(-job - 1) }

// NoteLeading records the ranges this node leads (from a stats reading) for the tracker's hooks.
func (s *Service) NoteLeading(st *pb.NodeStats) {
	led := []uint64{}
	for _, rl := range st.Ranges {
		if rl.Leader {
			led = append(led, rl.RangeId)
		}
	}
	s.ledNow.Store(&led)
}

// FillStats adds the tracker's status to a heartbeat's or a status page's stats.
func (s *Service) FillStats(st *pb.NodeStats) {
	ts := s.t.Status()
	for _, t := range ts.Tasks {
		bt := &pb.BackgroundTask{Id: t.ID, Kind: string(t.Kind), Name: t.Name, Running: t.State == bgtask.Running,
			Heavy: t.Heavy, Bytes: t.Bytes, SinceUnixNanos: t.Since.UnixNano()}
		if !t.Until.IsZero() {
			bt.UntilUnixNanos = t.Until.UnixNano()
		}
		st.Tasks = append(st.Tasks, bt)
	}
	kinds := make([]string, 0, len(ts.LastCompleted))
	for k := range ts.LastCompleted {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		st.LastCompleted = append(st.LastCompleted, &pb.TaskCompletion{Kind: k, AtUnixNanos: ts.LastCompleted[bgtask.Kind(k)].UnixNano()})
	}
	st.LedBefore = ts.LedBefore
}

// nodeBusy reports whether a node's last heartbeat shows a heavy task pending or running.
func nodeBusy(st *pb.NodeStats) bool {
	for _, t := range st.GetTasks() {
		if t.Heavy {
			return true
		}
	}
	return false
}

// shedCondition is the gate's rule for a heavy task on this node: proceed when the policy is off, or
// when this node leads no range that has another voter (proceed at once for those with none).
// Ranges with an idle live voter wait for the policy to move them; ranges whose other voters are all
// busy or not live postpone the task until one becomes idle (or MaxPostpone passes).
func (s *Service) shedCondition(ctx context.Context) bgtask.Condition {
	var checked time.Time
	on := true
	self := s.nodeID.Load()
	return func() (bool, string) {
		if time.Since(checked) > time.Second {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			v, err := records.SwitchOn(cctx, s.deps.Ranges, policy.NameShed)
			if err != nil {
				v = policy.DefaultOn(policy.NameShed)
			}
			on, checked = v, time.Now()
			cancel()
		}
		if !on {
			return true, "shed_leadership is off: ran without moving leaderships"
		}
		live := map[uint64]bool{}
		for _, id := range s.deps.Dir.LiveNodes(s.deps.LiveWindow()) {
			live[id] = true
		}
		movable, stuck := 0, 0
		for _, r := range s.deps.Store().Replicas() {
			d := r.Desc()
			if !r.IsLeader() || d == nil || r.RangeID() == replica.MetaRangeID {
				continue // shed_leadership leaves the meta range where it is
			}
			others, idle := 0, false
			for _, rd := range d.Replicas {
				if rd.NodeId == self || rd.Learner {
					continue
				}
				others++
				if st, draining := s.deps.Dir.StatsOf(rd.NodeId); live[rd.NodeId] && !draining && !nodeBusy(st) {
					idle = true
				}
			}
			switch {
			case others == 0:
			case idle:
				movable++
			default:
				stuck++
			}
		}
		switch {
		case movable > 0:
			return false, fmt.Sprintf("%d leaderships still to move", movable)
		case stuck > 0:
			return false, fmt.Sprintf("%d leaderships have no idle voter elsewhere (postponed)", stuck)
		}
		return true, "this node leads no range another idle voter could take"
	}
}

// majorityCondition holds a heavy task requested at since back while starting it would leave a
// range this node holds a voter of with fewer than a majority of its voters free: the others busy
// (a heavy task running, or requested before this one: of two tasks requested together the earlier,
// then the lower node id, goes first) or not live. Two nodes that share ranges then never run heavy
// tasks at once, and a node whose peer is down waits for it (or for MaxPostpone).
func (s *Service) majorityCondition(since time.Time) bgtask.Condition {
	self := s.nodeID.Load()
	return func() (bool, string) {
		if time.Since(since) < settleBeforeHeavy {
			return false, "peers are hearing of the task"
		}
		live := map[uint64]bool{}
		for _, id := range s.deps.Dir.LiveNodes(s.deps.LiveWindow()) {
			live[id] = true
		}
		for _, r := range s.deps.Store().Replicas() {
			d := r.Desc()
			if d == nil {
				continue
			}
			voters, busy := 0, 0
			for _, rd := range d.Replicas {
				if rd.Learner {
					continue
				}
				voters++
				if rd.NodeId == self {
					continue
				}
				if st, _ := s.deps.Dir.StatsOf(rd.NodeId); !live[rd.NodeId] || busyFirst(st, since, rd.NodeId, self) {
					busy++
				}
			}
			if quorumrisk.WouldLoseMajority(voters, busy) {
				return false, fmt.Sprintf("range %d would have %d of its %d voters busy or down (postponed)", r.RangeID(), busy+1, voters)
			}
		}
		return true, ""
	}
}

// settleBeforeHeavy is how long a heavy task waits before its first majority check: the heartbeat
// acquireHeavy sends at once reaches the peers by then, so two tasks requested together see each
// other and the earlier goes first.
const settleBeforeHeavy = 500 * time.Millisecond

// busyFirst reports whether peer's last heartbeat shows a heavy task running, or one requested
// before since (at the same instant: by a lower node id than self).
func busyFirst(st *pb.NodeStats, since time.Time, peer, self uint64) bool {
	for _, t := range st.GetTasks() {
		if !t.Heavy {
			continue
		}
		at := t.SinceUnixNanos
		if t.Running || at < since.UnixNano() || (at == since.UnixNano() && peer < self) {
			return true
		}
	}
	return false
}

// acquireHeavy registers a heavy task and waits at the gate (followers pass at once).
func (s *Service) acquireHeavy(ctx context.Context, kind bgtask.Kind, name string, until time.Time) (*bgtask.Handle, bgtask.Outcome, error) {
	// The tracker records the ranges led now as the ones to give back (preferred primary); the last
	// heartbeat's reading may be stale, and here (not on a Pebble goroutine) the store may be asked.
	led := []uint64{}
	for _, r := range s.deps.Store().Replicas() {
		if r.IsLeader() {
			led = append(led, r.RangeID())
		}
	}
	s.ledNow.Store(&led)
	s.deps.Kick()
	majority, shed := s.majorityCondition(time.Now()), s.shedCondition(ctx)
	h, out, err := s.t.Acquire(ctx, kind, name, until, func() (bool, string) {
		if ok, why := majority(); !ok {
			return false, why
		}
		return shed()
	})
	if err != nil {
		return nil, out, err
	}
	lvl := s.log.Info
	if out.GaveUp {
		lvl = s.log.Warn
	}
	lvl("heavy background task starting", "kind", kind, "name", name, "outcome", out.String())
	return h, out, nil
}

func (s *Service) runCompaction(ctx context.Context) (string, error) {
	h, out, err := s.acquireHeavy(ctx, bgtask.KindManualCompaction, "full compaction", time.Time{})
	if err != nil {
		return "", err
	}
	defer h.End()
	if err := s.deps.Engine.CompactAll(ctx); err != nil {
		return out.String(), err
	}
	return out.String(), nil
}

func (s *Service) runBackup(ctx context.Context, dir string, parent *backups.Parent, rate int64) (string, string, error) {
	h, out, err := s.acquireHeavy(ctx, bgtask.KindBackup, dir, time.Time{})
	if err != nil {
		return "", "", err
	}
	defer h.End()
	m, err := s.writeBackup(ctx, dir, parent, rate, h)
	return out.String(), m, err
}

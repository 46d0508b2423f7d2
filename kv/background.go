package kv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
)

// Background work (docs/design/shed-leadership.md). Every node tracks its compactions, flushes,
// backups and announced maintenance in a bgtask.Tracker and reports them in heartbeats. A heavy task
// this node starts itself (a manual compaction, a backup, an announcement) first waits at the
// tracker's gate, pending, while the autopilot's shed_leadership policy moves this node's leaderships
// to idle voters; it runs once none is left that could move, when the policy is off, or after
// Background.MaxPostpone. Automatic compactions cannot wait (Pebble starts them); a big one is
// reported as a running heavy task, and the policy sheds reactively.

// BackgroundConfig configures background work; zero values take defaults.
type BackgroundConfig struct {
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
}

// engineTasks turns the engine's compaction and flush events into tracked tasks.
type engineTasks struct {
	t *bgtask.Tracker
	// spanBytes is the input size from which a compaction's span is kept (mask_compaction's
	// MinBytes): every heartbeat maps a kept span to ranges, and smaller compactions are none of
	// the policy's business.
	spanBytes uint64
	mu        sync.Mutex
	jobs      map[int]*bgtask.Handle
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

func (e *engineTasks) CompactionBegin(job int, inputBytes uint64, reason string, span storage.Span) {
	if !storage.RewritesData(reason) || inputBytes < e.spanBytes {
		span = storage.Span{} // its tables keep their cached blocks (or too few are rewritten to matter)
	}
	e.begin(job, e.t.BeginSpan(bgtask.KindCompaction, fmt.Sprintf("job %d (%s)", job, reason), inputBytes, span))
}
func (e *engineTasks) CompactionEnd(job int) { e.end(job) }
func (e *engineTasks) FlushBegin(job int, bytes uint64) {
	e.begin(-job-1, e.t.Begin(bgtask.KindFlush, fmt.Sprintf("job %d", job), bytes))
}
func (e *engineTasks) FlushEnd(job int) { e.end(-job - 1) }

// initBackground creates the tracker and hooks the engine to it.
func (n *Node) initBackground() {
	n.bg = bgtask.NewTracker(n.cfg.Background.Config, nil)
	n.hbKick = make(chan struct{}, 1)
	empty := []uint64{}
	n.ledNow.Store(&empty)
	// The hooks run on Pebble's goroutines: they must not take replica locks, so the ranges this node
	// leads come from the last heartbeat's reading.
	n.bg.SetHooks(func() []uint64 { return *n.ledNow.Load() }, n.kickHeartbeat)
	n.eng.SetBackgroundListener(&engineTasks{t: n.bg, spanBytes: n.cfg.Autopilot.Policies.WithDefaults().Mask.MinBytes,
		jobs: map[int]*bgtask.Handle{}})
}

// Background is the node's background-task tracker (status pages and tests).
func (n *Node) Background() *bgtask.Tracker { return n.bg }

// kickHeartbeat asks the heartbeat loop to report now rather than at its next interval.
func (n *Node) kickHeartbeat() {
	select {
	case n.hbKick <- struct{}{}:
	default:
	}
}

// heartbeatLoop sends heartbeats every HeartbeatInterval, and at once when a heavy task appears or ends.
// The first goes out at once: a started node's first load report is what makes it live to the
// others and lets the autopilot start its join (see Heartbeat), a whole interval sooner.
func (n *Node) heartbeatLoop() {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := n.stopContext()
		defer cancel()
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-n.stopper:
				return
			case <-t.C:
			case <-n.hbKick:
				if !t.Stop() {
					select {
					case <-t.C:
					default:
					}
				}
			}
			n.sendHeartbeats(ctx)
			t.Reset(n.cfg.HeartbeatInterval)
		}
	}()
}

// noteLeading records the ranges this node leads (from a stats reading) for the tracker's hooks.
func (n *Node) noteLeading(st *pb.NodeStats) {
	led := []uint64{}
	for _, rl := range st.Ranges {
		if rl.Leader {
			led = append(led, rl.RangeId)
		}
	}
	n.ledNow.Store(&led)
}

// fillBackground adds the tracker's status to a heartbeat's stats.
func (n *Node) fillBackground(st *pb.NodeStats) {
	s := n.bg.Status()
	var spans []replicaSpan
	for _, t := range s.Tasks {
		bt := &pb.BackgroundTask{Id: t.ID, Kind: string(t.Kind), Name: t.Name, Running: t.State == bgtask.Running,
			Heavy: t.Heavy, Bytes: t.Bytes, SinceUnixNanos: t.Since.UnixNano()}
		if !t.Until.IsZero() {
			bt.UntilUnixNanos = t.Until.UnixNano()
		}
		if t.Span.Smallest != nil {
			if spans == nil {
				spans = n.replicaSpans()
			}
			bt.RangeIds = rangesInSpan(spans, t.Span)
		}
		st.Tasks = append(st.Tasks, bt)
	}
	kinds := make([]string, 0, len(s.LastCompleted))
	for k := range s.LastCompleted {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		st.LastCompleted = append(st.LastCompleted, &pb.TaskCompletion{Kind: k, AtUnixNanos: s.LastCompleted[bgtask.Kind(k)].UnixNano()})
	}
	st.LedBefore = s.LedBefore
}

// replicaSpan is the engine span of one local replica's data.
type replicaSpan struct {
	rangeID uint64
	lo, hi  []byte
}

// replicaSpans lists the local replicas' data spans by ascending range ID (Store.Replicas' order).
func (n *Node) replicaSpans() []replicaSpan {
	var out []replicaSpan
	for _, r := range n.store.Replicas() {
		d := r.Desc()
		if d == nil {
			continue
		}
		lo, hi := storage.DataSpan(r.IsMeta(), d.StartKey, d.EndKey)
		out = append(out, replicaSpan{rangeID: r.RangeID(), lo: lo, hi: hi})
	}
	return out
}

// rangesInSpan lists the ranges whose data overlaps a compaction's span, in the order of spans
// (replicaSpans': ascending range IDs). A compaction of raft state alone overlaps none.
func rangesInSpan(spans []replicaSpan, s storage.Span) []uint64 {
	var ids []uint64
	for _, rs := range spans {
		if s.Overlaps(rs.lo, rs.hi) {
			ids = append(ids, rs.rangeID)
		}
	}
	return ids
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

// shedPolicyOn reads the shed_leadership switch from the meta range (on unless switched off).
func (n *Node) shedPolicyOn(ctx context.Context) bool {
	kvs, err := n.metaScan(ctx, metaPolicyKey(policy.NameShed), append(metaPolicyKey(policy.NameShed), 0), 1)
	if err != nil || len(kvs) == 0 {
		return !defaultOff[policy.NameShed]
	}
	return string(kvs[0].Value) == "on"
}

// shedCondition is the gate's rule for a heavy task on this node: proceed when the policy is off, or
// when this node leads no range that has another voter (proceed at once for those with none).
// Ranges with an idle live voter wait for the policy to move them; ranges whose other voters are all
// busy or not live postpone the task until one becomes idle (or MaxPostpone passes).
func (n *Node) shedCondition(ctx context.Context) bgtask.Condition {
	var checked time.Time
	on := true
	return func() (bool, string) {
		if time.Since(checked) > time.Second {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			on, checked = n.shedPolicyOn(cctx), time.Now()
			cancel()
		}
		if !on {
			return true, "shed_leadership is off: ran without moving leaderships"
		}
		live := map[uint64]bool{}
		for _, id := range n.dir.liveNodes(n.liveWindow()) {
			live[id] = true
		}
		movable, stuck := 0, 0
		for _, r := range n.store.Replicas() {
			d := r.Desc()
			if !r.IsLeader() || d == nil || r.RangeID() == replica.MetaRangeID {
				continue // shed_leadership leaves the meta range where it is
			}
			others, idle := 0, false
			for _, rd := range d.Replicas {
				if rd.NodeId == n.ident.NodeID || rd.Learner {
					continue
				}
				others++
				if st, draining := n.dir.statsOf(rd.NodeId); live[rd.NodeId] && !draining && !nodeBusy(st) {
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

// acquireHeavy registers a heavy task and waits at the gate (followers pass at once).
func (n *Node) acquireHeavy(ctx context.Context, kind bgtask.Kind, name string, until time.Time) (*bgtask.Handle, bgtask.Outcome, error) {
	// The tracker records the ranges led now as the ones to give back (preferred primary); the last
	// heartbeat's reading may be stale, and here (not on a Pebble goroutine) the store may be asked.
	led := []uint64{}
	for _, r := range n.store.Replicas() {
		if r.IsLeader() {
			led = append(led, r.RangeID())
		}
	}
	n.ledNow.Store(&led)
	n.kickHeartbeat()
	h, out, err := n.bg.Acquire(ctx, kind, name, until, n.shedCondition(ctx))
	if err != nil {
		return nil, out, err
	}
	lvl := n.log.Info
	if out.GaveUp {
		lvl = n.log.Warn
	}
	lvl("heavy background task starting", "kind", kind, "name", name, "outcome", out.String())
	return h, out, nil
}

// peerFor returns a client for nodeID when the request is for another node (nil: this one).
func (n *Node) peerFor(nodeID uint64) (pb.ShoalClient, *pb.Error) {
	if nodeID == 0 || nodeID == n.ident.NodeID {
		return nil, nil
	}
	addr, ok := n.dir.resolve(nodeID)
	if !ok {
		return nil, &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: fmt.Sprintf("unknown node %d", nodeID)}
	}
	c, err := n.peers.client(addr)
	if err != nil {
		return nil, &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: fmt.Sprintf("node %d: %v", nodeID, err)}
	}
	return c, nil
}

// Compact implements pb.ShoalServer: a full manual compaction of node_id's engine, after shedding its
// leaderships. It returns when the compaction is done.
func (n *Node) Compact(ctx context.Context, req *pb.CompactRequest) (*pb.CompactResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.CompactResponse{Error: pe}, nil
	}
	if c, pe := n.peerFor(req.NodeId); pe != nil {
		return &pb.CompactResponse{Error: pe}, nil
	} else if c != nil {
		return c.Compact(ctx, req)
	}
	start := time.Now()
	out, err := n.runCompaction(ctx)
	resp := &pb.CompactResponse{Outcome: out, DurationMs: time.Since(start).Milliseconds(), NodeId: n.ident.NodeID}
	if err != nil {
		resp.Error = &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: err.Error()}
	}
	return resp, nil
}

func (n *Node) runCompaction(ctx context.Context) (string, error) {
	h, out, err := n.acquireHeavy(ctx, bgtask.KindManualCompaction, "full compaction", time.Time{})
	if err != nil {
		return "", err
	}
	defer h.End()
	if err := n.eng.CompactAll(ctx); err != nil {
		return out.String(), err
	}
	return out.String(), nil
}

// Backup implements pb.ShoalServer: a backup of every range with a replica on node_id into dir on that
// node's host (backup.go). It returns when the backup is complete.
func (n *Node) Backup(ctx context.Context, req *pb.BackupRequest) (*pb.BackupResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.BackupResponse{Error: pe}, nil
	}
	if c, pe := n.peerFor(req.NodeId); pe != nil {
		return &pb.BackupResponse{Error: pe}, nil
	} else if c != nil {
		return c.Backup(ctx, req)
	}
	if req.Dir == "" || !filepath.IsAbs(req.Dir) {
		return &pb.BackupResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
			Message: fmt.Sprintf("backup directory %q must be an absolute path on the node's host", req.Dir)}}, nil
	}
	if err := checkEmptyDir(req.Dir); err != nil {
		return &pb.BackupResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: err.Error()}}, nil
	}
	start := time.Now()
	out, m, err := n.runBackup(ctx, req.Dir, req.RateBytesPerSec)
	resp := &pb.BackupResponse{Outcome: out, DurationMs: time.Since(start).Milliseconds(), NodeId: n.ident.NodeID, ManifestJson: m}
	if err != nil {
		resp.Error = &pb.Error{Code: pb.ErrorCode_INTERNAL, Message: err.Error()}
	}
	return resp, nil
}

func (n *Node) runBackup(ctx context.Context, dir string, rate int64) (string, string, error) {
	h, out, err := n.acquireHeavy(ctx, bgtask.KindBackup, dir, time.Time{})
	if err != nil {
		return "", "", err
	}
	defer h.End()
	m, err := n.writeBackup(ctx, dir, rate, h)
	return out.String(), m, err
}

func checkEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup directory %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("backup directory %s is not empty; choose a new one", dir)
	}
	return nil
}

// Maintenance implements pb.ShoalServer: an operator's job announces that it is about to load node_id
// for duration_ms. The call returns once the job may start (the node's leaderships have moved, or
// the postponement bound passed); the announcement ends after the duration or when the job calls
// again with end set.
func (n *Node) Maintenance(ctx context.Context, req *pb.MaintenanceRequest) (*pb.MaintenanceResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.MaintenanceResponse{Error: pe}, nil
	}
	if c, pe := n.peerFor(req.NodeId); pe != nil {
		return &pb.MaintenanceResponse{Error: pe}, nil
	} else if c != nil {
		return c.Maintenance(ctx, req)
	}
	bad := func(msg string) (*pb.MaintenanceResponse, error) {
		return &pb.MaintenanceResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Message: msg}}, nil
	}
	if req.Task == "" {
		return bad("maintenance: a task name is required")
	}
	n.annMu.Lock()
	h, exists := n.announced[req.Task]
	if req.End {
		delete(n.announced, req.Task)
	}
	n.annMu.Unlock()
	if req.End {
		if !exists {
			return bad(fmt.Sprintf("maintenance: no announced task %q on node %d", req.Task, n.ident.NodeID))
		}
		h.End()
		return &pb.MaintenanceResponse{Outcome: "ended", NodeId: n.ident.NodeID}, nil
	}
	d := time.Duration(req.DurationMs) * time.Millisecond
	if d <= 0 || d > 24*time.Hour {
		return bad(fmt.Sprintf("maintenance: duration %s must be in (0, 24h]", d))
	}
	if exists {
		return bad(fmt.Sprintf("maintenance: task %q is already announced on node %d", req.Task, n.ident.NodeID))
	}
	h, out, err := n.acquireHeavy(ctx, bgtask.KindAnnounced, req.Task, time.Now().Add(d))
	if err != nil {
		return &pb.MaintenanceResponse{Error: &pb.Error{Code: pb.ErrorCode_TIMEOUT, Message: err.Error()}}, nil
	}
	n.annMu.Lock()
	n.announced[req.Task] = h
	n.annMu.Unlock()
	time.AfterFunc(d, func() {
		n.annMu.Lock()
		if n.announced[req.Task] == h {
			delete(n.announced, req.Task)
		}
		n.annMu.Unlock()
		h.End()
	})
	return &pb.MaintenanceResponse{Outcome: out.String(), NodeId: n.ident.NodeID}, nil
}

// startPeriodicTasks runs the configured periodic compactions and backups, jittered per node.
func (n *Node) startPeriodicTasks() {
	bc := n.cfg.Background
	periodic := func(base time.Duration, what string, run func(ctx context.Context) error) {
		if base <= 0 {
			return
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			ctx, cancel := n.stopContext()
			defer cancel()
			rng := rand.New(rand.NewPCG(n.ident.NodeID, uint64(time.Now().UnixNano())))
			for wait := bgtask.FirstDelay(base, rng); n.sleep(wait); wait = bgtask.Jittered(base, rng) {
				if err := run(ctx); err != nil && ctx.Err() == nil {
					n.log.Error("periodic background task failed", "task", what, "err", err)
				}
			}
		}()
	}
	periodic(bc.CompactInterval, "full compaction", func(ctx context.Context) error {
		_, err := n.runCompaction(ctx)
		return err
	})
	periodic(bc.BackupInterval, "backup", func(ctx context.Context) error {
		if bc.BackupDir == "" {
			return fmt.Errorf("backup interval set without a backup directory")
		}
		dir := filepath.Join(bc.BackupDir, fmt.Sprintf("backup-%d", time.Now().Unix()))
		_, _, err := n.runBackup(ctx, dir, bc.BackupRateBytesPerSec)
		return err
	})
}

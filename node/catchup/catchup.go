// Package catchup owns a node's catching up after its start. A restarted node's replicas miss
// whatever their ranges committed while it was down. Until each of its voter replicas has applied
// what its range's leader had applied when asked, the node is *catching up*: its heartbeats say it
// takes no leadership (the autopilot gives it none back, a peer's prestop drain passes it by, a heavy
// task counts it busy), /healthz answers 503 "catching up" (an orchestrator's rolling restart stops
// the next node only once this one is ready), and `shoal node poststart` waits for it. A leadership
// handed to a replica that holds the log but has not applied it serves its first reads only once it
// has, and from a cache that has not seen the recent writes.
//
// It owns the catching-up state, its one goroutine (run by the node's loops) and the answer to the
// poststart task. It only reads: it must never write to a replica, move a leadership or hold the
// node out of service for longer than Bound — the node's assembly (package node) wires what it
// reads and what follows its end.
package catchup

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// Bound is how long a node stays catching up at most: a replica that cannot catch up (its range
// dropped it while the node was down, its peers unreachable) must not keep the node out of service;
// the node logs which replicas were still behind.
const Bound = 30 * time.Second

// poll is how often the catching-up node checks its replicas' applied indexes.
const poll = 50 * time.Millisecond

// Replica is what the catch-up check needs of one local voter replica.
type Replica struct {
	RangeID uint64
	Applied uint64
	Leader  uint64   // node id of the leader this replica knows (0: none heard yet)
	Voters  []uint64 // node ids of the range's other voters
}

// AppliedAsker asks node for its replica of rangeID's applied index.
type AppliedAsker func(ctx context.Context, node, rangeID uint64) (uint64, error)

// Deps is what the tracker reads of its node, and what it tells it.
type Deps struct {
	// Self is the node's id (known once the node started).
	Self func() uint64
	// Replicas lists the node's voter replicas with their peers (FromStore).
	Replicas func() []Replica
	// Ask asks a peer for its replica's applied index.
	Ask AppliedAsker
	// CaughtUp is called once when the catch-up ends, so that the heartbeat's leadership flag
	// follows at once (may be nil).
	CaughtUp func()
	Logger   *slog.Logger
}

// Tracker is one node's catch-up: catching up from New until Run ends.
type Tracker struct {
	deps       Deps
	catchingUp atomic.Bool
	done       chan struct{}
}

// New returns a tracker that is catching up.
func New(deps Deps) *Tracker {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	t := &Tracker{deps: deps, done: make(chan struct{})}
	t.catchingUp.Store(true)
	return t
}

// Run runs once raft has started: it ends the catch-up when every local voter replica has reached
// its target, after Bound, or when ctx ends.
func (t *Tracker) Run(ctx context.Context) {
	defer t.end()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, Bound)
	defer cancel()
	tg := targets{}
	for {
		rs := t.deps.Replicas()
		behind := tg.pending(ctx, t.deps.Self(), rs, t.deps.Ask)
		if len(behind) == 0 {
			if len(rs) > 0 {
				t.deps.Logger.Info("replicas caught up with their peers", "replicas", len(rs), "took", time.Since(start).Round(time.Millisecond))
			}
			return
		}
		select {
		case <-ctx.Done():
			if time.Since(start) >= Bound {
				t.deps.Logger.Warn("replicas still catching up: the node serves and takes leaderships anyway", "behind", len(behind), "of", len(rs), "ranges", behind, "bound", Bound)
			}
			return
		case <-time.After(poll):
		}
	}
}

// end ends the catch-up: readiness and the heartbeat's leadership flag follow at once.
func (t *Tracker) end() {
	if t.catchingUp.CompareAndSwap(true, false) {
		close(t.done)
		if t.deps.CaughtUp != nil {
			t.deps.CaughtUp()
		}
	}
}

// CatchingUp reports whether the node's replicas are still catching up after its start.
func (t *Tracker) CatchingUp() bool { return t.catchingUp.Load() }

// Wait waits until the node's replicas have caught up or ctx ends; it reports whether they have.
func (t *Tracker) Wait(ctx context.Context) bool {
	select {
	case <-t.done:
		return true
	case <-ctx.Done():
		return !t.catchingUp.Load()
	}
}

// PostStart answers the poststart task (background.PostStartTask): once the replicas have caught
// up, or after d.
func (t *Tracker) PostStart(ctx context.Context, d time.Duration) *pb.MaintenanceResponse {
	self := t.deps.Self()
	if d <= 0 || d > time.Hour {
		return &pb.MaintenanceResponse{NodeId: self, Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
			Message: fmt.Sprintf("poststart: duration %s must be in (0, 1h]", d)}}
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	if !t.Wait(ctx) {
		return &pb.MaintenanceResponse{NodeId: self, Outcome: fmt.Sprintf("replicas still catching up after %s", time.Since(start).Round(time.Millisecond))}
	}
	return &pb.MaintenanceResponse{NodeId: self, Outcome: fmt.Sprintf("replicas caught up (waited %s)", time.Since(start).Round(time.Millisecond))}
}

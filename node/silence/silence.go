// Package silence wakes the quiet ranges of a node that died while leading them. A quiesced
// follower sleeps between its leader's writes and hears nothing from a dead leader: only the leader
// node's silence, as this node's heartbeats see it, tells it to stand for election. A node is
// silent once neither its heartbeats nor the answers to ours arrived for a heartbeat interval plus
// half an election timeout (1.5 s by default): both come once an interval, so a live node is seldom
// late by that much, and a wake-up it did not need costs the range at most an election.
//
// It owns that rule and its one check, run every raft tick by the node's loops (a silence is seen
// within a tick of crossing the bound; checked with the heartbeats, after twice their interval and
// an election timeout, a killed node's quiet ranges stayed leaderless 4-5 s). It only wakes
// replicas (the replica store catches a woken one up on the ticks it slept): it must never campaign,
// move a leadership, write to a range or count a silent node as dead for anything else — liveness
// is the directory's and the autopilot's — and it must never block the tick it runs on. The node's
// assembly (package node) wires what it reads.
package silence

import (
	"context"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// Nodes is what the watch reads of the node directory: the known nodes and when each was last
// heard from (a heartbeat or its answer).
type Nodes interface {
	All() []*pb.NodeDescriptor
	LastHeard(nodeID uint64) time.Time
}

// Waker wakes the quiesced replicas led from a node (replica.Store).
type Waker interface {
	WakeReplicasLedBy(node uint64)
}

// Watch is the check; its state (when each silent node's replicas were last woken) belongs to the
// one goroutine that runs Check.
type Watch struct {
	self    uint64
	nodes   Nodes
	store   Waker
	after   time.Duration
	again   time.Duration
	wokenAt map[uint64]time.Time
}

// New returns the watch of node self over its loaded replica store. A node is silent past
// heartbeat plus half of rc's election timeout; a still-silent node's replicas are woken again once
// every heartbeat interval, since a replica may fall asleep again under a leader that quiesces it
// while late.
func New(self uint64, nodes Nodes, store Waker, heartbeat time.Duration, rc replica.Config) *Watch {
	election := time.Duration(rc.ElectionTicks) * rc.TickInterval
	return &Watch{self: self, nodes: nodes, store: store, after: heartbeat + election/2, again: heartbeat,
		wokenAt: map[uint64]time.Time{}}
}

// After is the silence past which a node's replicas are woken.
func (w *Watch) After() time.Duration { return w.after }

// Check wakes the replicas led from every node silent past After, at most once an interval per
// node; a node heard from again is forgotten. It runs on one goroutine (the node's loop for it).
func (w *Watch) Check(context.Context) {
	w.check(time.Now())
}

func (w *Watch) check(now time.Time) {
	for _, nd := range w.nodes.All() {
		id := nd.NodeId
		if id == w.self || now.Sub(w.nodes.LastHeard(id)) <= w.after {
			delete(w.wokenAt, id)
			continue
		}
		if at, ok := w.wokenAt[id]; ok && now.Sub(at) < w.again {
			continue
		}
		w.wokenAt[id] = now
		w.store.WakeReplicasLedBy(id)
	}
}

// Package operator defines what the autopilot asks the cluster to do: an Operator is a named plan of
// Steps on one range (add a learner, promote it, move leadership, split, merge, ...), with a priority, a
// reason, a timeout, the benefit its policy predicts and the influence it will have on each node's load.
//
// The package owns the plan types, their declarative completion checks and the builders policies use.
// It must never execute anything, read a clock or keep state: operators are values that policies
// create and the executor runs.
//
// Invariant: an operator's steps are ordered and each step's IsFinished depends only on the observed
// range, so an operator can be resumed from any observed state by skipping the steps already finished.
package operator

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// Priority orders operators competing for the executor's limits: higher first. A higher-priority
// operator may replace a lower-priority one running on the same range.
type Priority int

const (
	// PriorityLow is for optimisations (rebalancing, merging cold ranges).
	PriorityLow Priority = iota
	// PriorityNormal is for operator-requested work (drain, decommission) and load splits.
	PriorityNormal
	// PriorityHigh is for availability: replacing lost replicas, restoring the replication factor.
	PriorityHigh
)

// String is "low", "normal" or "high".
func (p Priority) String() string {
	switch p {
	case PriorityLow:
		return "low"
	case PriorityNormal:
		return "normal"
	case PriorityHigh:
		return "high"
	}
	return fmt.Sprintf("priority(%d)", int(p))
}

// Operator is a plan of steps on one range.
type Operator struct {
	// ID is assigned by the executor when the operator is submitted (0 before).
	ID uint64
	// Kind names the plan ("move-replica", "split", ...).
	Kind string
	// Policy is the name of the policy that proposed the operator.
	Policy string
	// RangeID is the range the steps apply to.
	RangeID  uint64
	Steps    []Step
	Priority Priority
	// Reason says, for a human reading the decision log, why the policy proposed the operator.
	Reason string
	// Timeout bounds the whole operator from submission.
	Timeout time.Duration
	// Created is the model time at which the operator was proposed.
	Created time.Time
	// PredictedBenefit is what the policy expects the operator to change, in one metric.
	PredictedBenefit Benefit
	// Influence is what the operator, once done, adds to or takes from each node.
	Influence Influence

	// stepsDone is how many steps the executor has completed (atomic: the executor sets it while
	// policies read it). The model alone cannot tell a learner that is still receiving its snapshot
	// from one that has caught up (both are learners); the executor knows, as its add-learner call
	// returns only once the learner has caught up.
	stepsDone int32
	// pending is the last PendingInfluence and the range it was for: every policy asks it of every
	// pending operator every round, mostly of the same (immutable) range.
	pending atomic.Pointer[pendingInfluence]
}

type pendingInfluence struct {
	r   *model.Range
	inf Influence
}

// StepsDone returns how many of op's steps the executor has completed, in order (0 before it runs).
func (op *Operator) StepsDone() int { return int(atomic.LoadInt32(&op.stepsDone)) }

// SetStepsDone is for the executor: it records that the first n steps are complete.
func (op *Operator) SetStepsDone(n int) { atomic.StoreInt32(&op.stepsDone, int32(n)) }

// String is the operator's one-line description for logs and the decision log, e.g.
// "move-replica r5: add-learner n4, promote-voter n4 (remove n1)".
func (op *Operator) String() string {
	steps := make([]string, len(op.Steps))
	for i, s := range op.Steps {
		steps[i] = s.String()
	}
	return fmt.Sprintf("%s r%d: %s", op.Kind, op.RangeID, strings.Join(steps, ", "))
}

// Ranges returns the ranges op changes: its own and, for a merge, the right neighbour it absorbs.
func (op *Operator) Ranges() []uint64 {
	ids := []uint64{op.RangeID}
	for _, s := range op.Steps {
		if m, ok := s.(Merge); ok {
			ids = append(ids, m.RightRangeID)
		}
	}
	return ids
}

// FirstUnfinished returns the index of the first step r does not show as finished (len(Steps) if all
// are). The executor keeps its own, monotone, position; policies use this to estimate what is left.
func (op *Operator) FirstUnfinished(r *model.Range) int {
	for i, s := range op.Steps {
		if !s.IsFinished(r) {
			return i
		}
	}
	return len(op.Steps)
}

// IsFinished reports whether r shows every step as done.
func (op *Operator) IsFinished(r *model.Range) bool { return op.FirstUnfinished(r) == len(op.Steps) }

// PendingInfluence is the influence of the steps r does not show as finished yet: what the operator
// will still change. With r nil (the range is gone), it is the whole influence. The caller must not
// modify it: it is kept for the next caller with the same r (a *model.Range is immutable).
func (op *Operator) PendingInfluence(r *model.Range) Influence {
	if r == nil {
		return op.Influence
	}
	if p := op.pending.Load(); p != nil && p.r == r {
		return p.inf
	}
	inf := stepsInfluence(op.Steps[op.FirstUnfinished(r):], r)
	op.pending.Store(&pendingInfluence{r: r, inf: inf})
	return inf
}

func stepsInfluence(steps []Step, r *model.Range) Influence {
	inf := Influence{}
	for _, s := range steps {
		s.Influence(r, inf)
		r = s.Apply(r)
	}
	return inf
}

// NodeInfluence is a change to one node's load.
type NodeInfluence struct {
	Replicas int
	Leaders  int
	Bytes    int64
	QPS      float64
}

// Influence is a change to the load of several nodes, by node ID.
type Influence map[uint64]NodeInfluence

func (inf Influence) add(node uint64, d NodeInfluence) {
	cur := inf[node]
	cur.Replicas += d.Replicas
	cur.Leaders += d.Leaders
	cur.Bytes += d.Bytes
	cur.QPS += d.QPS
	inf[node] = cur
}

// Add adds other to inf.
func (inf Influence) Add(other Influence) {
	for n, d := range other {
		inf.add(n, d)
	}
}

// String lists the non-zero changes by node, e.g. "n1: -1 replica -64MiB; n4: +1 replica +64MiB".
func (inf Influence) String() string {
	ids := make([]uint64, 0, len(inf))
	for id := range inf {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var parts []string
	for _, id := range ids {
		d := inf[id]
		var p []string
		if d.Replicas != 0 {
			p = append(p, fmt.Sprintf("%+d replicas", d.Replicas))
		}
		if d.Leaders != 0 {
			p = append(p, fmt.Sprintf("%+d leaders", d.Leaders))
		}
		if d.Bytes > 0 {
			p = append(p, "+"+model.FormatBytes(uint64(d.Bytes)))
		} else if d.Bytes < 0 {
			p = append(p, "-"+model.FormatBytes(uint64(-d.Bytes)))
		}
		if d.QPS != 0 {
			p = append(p, fmt.Sprintf("%+.0f qps", d.QPS))
		}
		if len(p) > 0 {
			parts = append(parts, fmt.Sprintf("n%d: %s", id, strings.Join(p, " ")))
		}
	}
	return strings.Join(parts, "; ")
}

// Timeouts turn the data a step moves into how long it may take.
type Timeouts struct {
	// SnapshotRate is the rate at which a snapshot is expected to stream, in bytes per second.
	SnapshotRate uint64
	// Base is the fixed part of every step's timeout (elections, conf-change round trips).
	Base time.Duration
	// Slack multiplies the expected transfer time.
	Slack float64
}

// Default timeouts: snapshots at 32 MiB/s, 10 s per step, twice the expected transfer time.
const (
	DefaultSnapshotRate = 32 << 20
	DefaultStepBase     = 10 * time.Second
	DefaultSlack        = 2.0
)

// DefaultTimeouts are the Timeouts used when none are configured.
var DefaultTimeouts = Timeouts{SnapshotRate: DefaultSnapshotRate, Base: DefaultStepBase, Slack: DefaultSlack}

func (t Timeouts) base() time.Duration {
	if t.Base <= 0 {
		return DefaultStepBase
	}
	return t.Base
}

func (t Timeouts) transfer(bytes uint64) time.Duration {
	rate, slack := t.SnapshotRate, t.Slack
	if rate == 0 {
		rate = DefaultSnapshotRate
	}
	if slack <= 0 {
		slack = DefaultSlack
	}
	return t.base() + time.Duration(slack*float64(bytes)/float64(rate)*float64(time.Second))
}

// Step returns s's timeout on r.
func (t Timeouts) Step(s Step, r *model.Range) time.Duration { return s.Timeout(r, t) }

// Total is the sum of the steps' timeouts on r (each planned on the range as the previous steps leave it).
func (t Timeouts) Total(steps []Step, r *model.Range) time.Duration {
	var d time.Duration
	for _, s := range steps {
		d += s.Timeout(r, t)
		r = s.Apply(r)
	}
	return d
}

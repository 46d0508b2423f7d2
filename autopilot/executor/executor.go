// Package executor runs the autopilot's operators against the cluster: it issues each step through the
// Actuator the node implements, watches the cluster model until the step shows as finished, enforces
// the limits (one operator per range, concurrent snapshots per node, timeouts) and cancels an operator
// as soon as a new snapshot contradicts it. Every outcome goes to the decision log.
//
// The package owns the running operators and the goroutines that call the Actuator. It must never
// decide what to do — operators come from policies — and never touches the cluster except through
// the Actuator.
//
// Invariants: at most one operator per range (a merge counts for both its ranges); at most MaxSnapshotsPerNode AddLearner calls in flight
// that involve a node (as the receiver, or as the leader sending the snapshot); a step is issued at most
// once per operator; a step counts as done only when the model shows it (IsFinished), never merely
// because the Actuator returned.
package executor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// Actuator changes the cluster; the node leading the meta range implements it (so does the tests' fake
// cluster). Each call performs one step on one range and returns when the change is committed or has
// failed. Calls must honour ctx (the step's timeout, or cancellation) and be safe to repeat: the
// executor may issue a step whose effect the model does not show yet after an autopilot restart.
type Actuator interface {
	// AddLearner adds a non-voting replica of rangeID on node and sends it a snapshot.
	AddLearner(ctx context.Context, rangeID, node uint64) error
	// PromoteVoter makes the learner on node a voter; if remove is not 0, the replica on remove leaves
	// in the same (joint) configuration change.
	PromoteVoter(ctx context.Context, rangeID, node, remove uint64) error
	// RemoveReplica removes the replica of rangeID on node.
	RemoveReplica(ctx context.Context, rangeID, node uint64) error
	// TransferLeader moves the leadership of rangeID to the voter on node to.
	TransferLeader(ctx context.Context, rangeID, to uint64) error
	// Split splits rangeID at key; the left half keeps rangeID.
	Split(ctx context.Context, rangeID uint64, key []byte) error
	// Merge merges the right neighbour of leftRangeID into it.
	Merge(ctx context.Context, leftRangeID uint64) error
}

// ProfileSetter is implemented by an Actuator that can change a node's engine profile (the
// SetProfile step). The call may return once the change is under way: the step is done when the
// model shows the node running the profile.
type ProfileSetter interface {
	SetProfile(ctx context.Context, node uint64, profile string) error
}

// Warmer is implemented by an Actuator that checks, before a leadership transfer, that the target's
// cache is warm (read hints, docs/design/read-hints.md): it may wait a bounded time (within ctx) and
// returns a note for the decision log saying what it saw ("" when it did not check). The executor
// transfers afterwards whatever the note says.
type Warmer interface {
	WarmBeforeTransfer(ctx context.Context, rangeID, to uint64, readQPS float64) string
}

// Config configures an Executor. The zero value of each field means its default.
type Config struct {
	// Interval is how often the executor re-reads the model while operators run. Default 200ms.
	Interval time.Duration
	// MaxSnapshotsPerNode bounds the AddLearner steps in flight per node, counting the receiving
	// node and the leader sending the snapshot. Default 2.
	MaxSnapshotsPerNode int
	// MaxOperators bounds the operators running at once. Default 256.
	MaxOperators int
	// Timeouts scale step timeouts with the bytes they move. Default operator.DefaultTimeouts
	// (32 MiB/s snapshots).
	Timeouts operator.Timeouts
	// Inline makes Reconcile call the Actuator on the caller's goroutine instead of spawning one per
	// step (deterministic tests). The Actuator must then not call the Executor.
	Inline bool
	// OnProgress, if set, is called (without the executor's lock held) after a reconciliation in
	// which an operator finished or moved to its next step: the autopilot uses it to plan the next
	// step of sequential work at once instead of at its next round.
	OnProgress func() `json:"-"`
}

// Defaults.
const (
	DefaultInterval            = 200 * time.Millisecond
	DefaultMaxSnapshotsPerNode = 2
	DefaultMaxOperators        = 256
)

// WithDefaults returns c with every zero setting at its default.
func (c Config) WithDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.MaxSnapshotsPerNode <= 0 {
		c.MaxSnapshotsPerNode = DefaultMaxSnapshotsPerNode
	}
	if c.MaxOperators <= 0 {
		c.MaxOperators = DefaultMaxOperators
	}
	if c.Timeouts.SnapshotRate == 0 {
		c.Timeouts.SnapshotRate = operator.DefaultSnapshotRate
	}
	if c.Timeouts.Base <= 0 {
		c.Timeouts.Base = operator.DefaultStepBase
	}
	if c.Timeouts.Slack <= 0 {
		c.Timeouts.Slack = operator.DefaultSlack
	}
	return c
}

// Errors returned by Submit.
var (
	ErrRangeBusy         = errors.New("range already has an operator")
	ErrTooManyOperators  = errors.New("too many operators running")
	ErrInvalidOperator   = errors.New("invalid operator")
	errExecutorStopped   = errors.New("executor stopped")
	errUnknownStepForAct = errors.New("step kind unknown to the executor")
)

type running struct {
	op        *operator.Operator
	step      int       // index of the current step; monotone
	submitted time.Time // model time
	deadline  time.Time // model time by which the whole operator must be done

	issued       bool      // the current step's call was made
	issuedAt     time.Time // model time the current step's call was made
	stepTimeout  time.Duration
	stepBytes    uint64    // the range's bytes when the current step was issued
	stepDeadline time.Time // model time by which the current step must show as finished
	inflight     bool      // the current step's call has not returned
	callDone     bool      // a result is waiting to be looked at
	callErr      error
	cancel       context.CancelFunc
	waiting      string // why the current step is not issued yet
	finished     bool
}

// Executor runs operators. Create it with New; Submit operators; either Start its goroutine (it then
// reads the Source every Interval) or call Reconcile with each new snapshot yourself.
type Executor struct {
	cfg Config
	src model.Source
	act Actuator
	log *decisions.Log

	mu     sync.Mutex
	ops    map[uint64]*running // by range ID
	slots  map[uint64]int      // AddLearner calls in flight per node
	rates  *snapshotRates      // the snapshot rate budgeted per receiving node
	last   *model.Cluster
	ctx    context.Context // cancelled by Stop; parent of every Actuator call
	cancel context.CancelFunc

	wake  chan struct{}
	loop  sync.WaitGroup // the Start goroutine
	calls sync.WaitGroup // Actuator calls
}

// New returns an executor reading src, acting through act and recording in log (a new log with
// defaults if nil).
func New(src model.Source, act Actuator, log *decisions.Log, cfg Config) *Executor {
	if log == nil {
		log = decisions.NewLog(0, 0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg = cfg.WithDefaults()
	return &Executor{cfg: cfg, src: src, act: act, log: log, ops: map[uint64]*running{},
		slots: map[uint64]int{}, rates: newSnapshotRates(cfg.Timeouts.SnapshotRate), ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1)}
}

// Log returns the decision log the executor records into.
func (e *Executor) Log() *decisions.Log { return e.log }

// Config returns the executor's configuration with defaults filled in.
func (e *Executor) Config() Config { return e.cfg }

// Start runs the executor's goroutine: every Interval, and whenever a step call returns, it takes a
// snapshot from the Source and reconciles. Start after Stop starts again with no operators.
func (e *Executor) Start() {
	e.mu.Lock()
	if e.ctx.Err() != nil {
		e.ctx, e.cancel = context.WithCancel(context.Background())
	}
	ctx := e.ctx
	e.mu.Unlock()
	e.loop.Add(1)
	go func() {
		defer e.loop.Done()
		t := time.NewTicker(e.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-e.wake:
			}
			if c := e.src.Snapshot(); c != nil {
				e.Reconcile(c)
			}
		}
	}()
}

// Stop ends the goroutine, cancels every Actuator call in flight and waits for them, and records the
// operators still running as stopped. The operators are not undone: their steps are declarative, so
// the next autopilot (on this node or another) proposes what is still needed and resumes from there.
func (e *Executor) Stop() {
	e.mu.Lock()
	e.cancel()
	e.mu.Unlock()
	e.loop.Wait()
	e.calls.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if e.last != nil {
		now = e.last.Now
	}
	for _, rs := range e.ops {
		e.finishLocked(rs, decisions.StatusStopped, now)
	}
}

// Submit queues op. It fails if op's range already has an operator of the same or higher priority
// (a lower-priority one is replaced), or if too many operators run.
func (e *Executor) Submit(op *operator.Operator) error {
	if op == nil || len(op.Steps) == 0 || op.RangeID == 0 {
		return fmt.Errorf("%w: %v", ErrInvalidOperator, op)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := op.Created
	if e.last != nil && (now.IsZero() || e.last.Now.After(now)) {
		now = e.last.Now
	}
	conflicts := e.conflictsLocked(op)
	for _, cur := range conflicts {
		if cur.op.Priority >= op.Priority {
			return fmt.Errorf("%w: r%d runs operator %d (%s, %s priority)", ErrRangeBusy, cur.op.RangeID, cur.op.ID,
				cur.op.Kind, cur.op.Priority)
		}
	}
	for _, cur := range conflicts {
		e.finishLocked(cur, fmt.Sprintf("%s: by a %s-priority %s from %s", decisions.StatusReplaced, op.Priority,
			op.Kind, op.Policy), now)
	}
	if len(e.ops) >= e.cfg.MaxOperators {
		return fmt.Errorf("%w (%d): r%d must wait", ErrTooManyOperators, len(e.ops), op.RangeID)
	}
	timeout := op.Timeout
	if r := e.rangeLocked(op.RangeID); r != nil {
		timeout = max(timeout, e.totalLocked(op.Steps, r))
	}
	if timeout <= 0 {
		timeout = time.Duration(len(op.Steps)) * e.cfg.Timeouts.Base
	}
	e.log.Record(op, now)
	e.ops[op.RangeID] = &running{op: op, submitted: now, deadline: now.Add(timeout)}
	e.poke()
	return nil
}

// conflictsLocked returns the running operators that change a range op changes.
func (e *Executor) conflictsLocked(op *operator.Operator) []*running {
	var out []*running
	for _, rs := range e.sortedLocked() {
		if overlap(rs.op.Ranges(), op.Ranges()) {
			out = append(out, rs)
		}
	}
	return out
}

func overlap(a, b []uint64) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func (e *Executor) rangeLocked(id uint64) *model.Range {
	if e.last == nil {
		return nil
	}
	return e.last.Range(id)
}

func (e *Executor) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Pending returns the operators running or waiting, highest priority first.
func (e *Executor) Pending() []*operator.Operator {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*operator.Operator, 0, len(e.ops))
	for _, rs := range e.sortedLocked() {
		out = append(out, rs.op)
	}
	return out
}

// Busy reports whether an operator changes rangeID.
func (e *Executor) Busy(rangeID uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, rs := range e.ops {
		if overlap(rs.op.Ranges(), []uint64{rangeID}) {
			return true
		}
	}
	return false
}

// Cancel cancels the operator on rangeID, if any, recording reason.
func (e *Executor) Cancel(rangeID uint64, reason string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := e.ops[rangeID]
	if rs == nil {
		return false
	}
	e.finishLocked(rs, decisions.StatusCanceled+": "+reason, e.nowLocked())
	return true
}

// CancelPolicy cancels every operator proposed by policy (e.g. because it was switched off).
func (e *Executor) CancelPolicy(policy, reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, rs := range e.sortedLocked() {
		if rs.op.Policy == policy {
			e.finishLocked(rs, decisions.StatusCanceled+": "+reason, e.nowLocked())
			n++
		}
	}
	return n
}

func (e *Executor) nowLocked() time.Time {
	if e.last != nil {
		return e.last.Now
	}
	return time.Now()
}

func (e *Executor) sortedLocked() []*running {
	out := make([]*running, 0, len(e.ops))
	for _, rs := range e.ops {
		out = append(out, rs)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].op.Priority != out[j].op.Priority {
			return out[i].op.Priority > out[j].op.Priority
		}
		return out[i].op.ID < out[j].op.ID
	})
	return out
}

// Reconcile moves every operator forward against snapshot c: it skips the steps c shows as finished,
// completes operators, cancels those c contradicts, times out those that overran, and issues the next
// step of the others within the limits. It also lets the decision log measure finished operators.
func (e *Executor) Reconcile(c *model.Cluster) {
	e.mu.Lock()
	e.last = c
	progressed := false
	for _, rs := range e.sortedLocked() {
		step := rs.step
		e.advanceLocked(c, rs)
		progressed = progressed || rs.finished || rs.step != step
	}
	e.mu.Unlock()
	e.log.Observe(c)
	if progressed && e.cfg.OnProgress != nil {
		e.cfg.OnProgress()
	}
}

func (e *Executor) advanceLocked(c *model.Cluster, rs *running) {
	op := rs.op
	r := c.Range(op.RangeID)
	if r == nil {
		e.finishLocked(rs, fmt.Sprintf("%s: r%d is gone", decisions.StatusCanceled, op.RangeID), c.Now)
		return
	}
	for {
		if rs.callDone {
			if rs.callErr != nil && e.ctx.Err() != nil {
				return // the executor is stopping and canceled the call: Stop records it as stopped
			}
			rs.callDone = false
			e.learnLocked(rs, c.Now, rs.callErr != nil)
			if rs.callErr != nil && !operator.Finished(op.Steps[rs.step], c, r) {
				e.finishLocked(rs, fmt.Sprintf("%s: %s: %v", decisions.StatusFailed, op.Steps[rs.step], rs.callErr), c.Now)
				return
			}
		}
		for !rs.inflight && rs.step < len(op.Steps) && operator.Finished(op.Steps[rs.step], c, r) {
			rs.step++
			op.SetStepsDone(rs.step)
			rs.issued, rs.waiting = false, ""
		}
		if rs.step == len(op.Steps) {
			e.finishLocked(rs, decisions.StatusSucceeded, c.Now)
			return
		}
		step := op.Steps[rs.step]
		if rs.inflight && operator.Finished(step, c, r) {
			// The model already shows the step done while its call is still returning: wait for the
			// call rather than check the step's preconditions against its own result (a done split's
			// key is no longer inside the range; a done merge's right range is gone).
			return
		}
		if c.Now.After(rs.deadline) {
			e.finishLocked(rs, fmt.Sprintf("%s: %s not done %s after submission", decisions.StatusTimedOut, step,
				rs.deadline.Sub(rs.submitted)), c.Now)
			return
		}
		if err := step.Check(c, r); err != nil {
			e.finishLocked(rs, fmt.Sprintf("%s: %s: %v", decisions.StatusCanceled, step, err), c.Now)
			return
		}
		if rs.issued {
			if c.Now.After(rs.stepDeadline) {
				e.learnLocked(rs, c.Now, true)
				e.finishLocked(rs, fmt.Sprintf("%s: %s took longer than %s", decisions.StatusTimedOut, step,
					rs.stepTimeout), c.Now)
			}
			return
		}
		if !e.issueLocked(c, r, rs) || !e.cfg.Inline {
			return
		}
		// Inline: the call already returned; look at its result against the same snapshot.
	}
}

// issueLocked starts the current step's Actuator call, unless a snapshot slot is missing.
func (e *Executor) issueLocked(c *model.Cluster, r *model.Range, rs *running) bool {
	step := rs.op.Steps[rs.step]
	var slotNodes []uint64
	if al, ok := step.(operator.AddLearner); ok {
		slotNodes = append(slotNodes, al.Node)
		if r.Leader != 0 && r.Leader != al.Node {
			slotNodes = append(slotNodes, r.Leader)
		}
		for _, n := range slotNodes {
			if e.slots[n] >= e.cfg.MaxSnapshotsPerNode {
				rs.waiting = fmt.Sprintf("n%d already has %d snapshots in flight", n, e.slots[n])
				return false
			}
		}
		for _, n := range slotNodes {
			e.slots[n]++
		}
	}
	timeout := e.timeoutLocked(step, r)
	rs.issued, rs.waiting, rs.inflight = true, "", true
	rs.issuedAt, rs.stepTimeout, rs.stepBytes = c.Now, timeout, r.Bytes
	rs.stepDeadline = c.Now.Add(timeout)
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	rs.cancel = cancel
	rangeID, opID, readQPS := rs.op.RangeID, rs.op.ID, r.ReadQPS
	done := func(err error) {
		cancel()
		for _, n := range slotNodes {
			e.slots[n]--
		}
		if !rs.finished {
			rs.inflight, rs.callDone, rs.callErr = false, true, err
		}
	}
	if e.cfg.Inline {
		done(e.timedCall(ctx, rangeID, opID, readQPS, step))
		return true
	}
	e.calls.Add(1)
	go func() {
		defer e.calls.Done()
		err := e.timedCall(ctx, rangeID, opID, readQPS, step)
		e.mu.Lock()
		done(err)
		e.mu.Unlock()
		e.poke()
	}()
	return true
}

// timedCall makes the step's call and records how long it took in the decision log.
func (e *Executor) timedCall(ctx context.Context, rangeID, opID uint64, readQPS float64, step operator.Step) error {
	start := time.Now()
	err := e.call(ctx, rangeID, opID, readQPS, step)
	e.log.StepDone(opID, step.String(), time.Since(start), err)
	return err
}

func (e *Executor) call(ctx context.Context, rangeID, opID uint64, readQPS float64, step operator.Step) error {
	if err := ctx.Err(); err != nil {
		return errExecutorStopped
	}
	switch s := step.(type) {
	case operator.AddLearner:
		return e.act.AddLearner(ctx, rangeID, s.Node)
	case operator.PromoteVoter:
		return e.act.PromoteVoter(ctx, rangeID, s.Node, s.Remove)
	case operator.RemoveReplica:
		return e.act.RemoveReplica(ctx, rangeID, s.Node)
	case operator.TransferLeader:
		if w, ok := e.act.(Warmer); ok {
			if note := w.WarmBeforeTransfer(ctx, rangeID, s.To, readQPS); note != "" {
				e.log.Annotate(opID, note)
			}
		}
		return e.act.TransferLeader(ctx, rangeID, s.To)
	case operator.Split:
		return e.act.Split(ctx, rangeID, s.Key)
	case operator.Merge:
		return e.act.Merge(ctx, rangeID)
	case operator.SetProfile:
		if ps, ok := e.act.(ProfileSetter); ok {
			return ps.SetProfile(ctx, s.Node, s.Profile)
		}
	}
	return fmt.Errorf("%w: %s", errUnknownStepForAct, step.Kind())
}

func (e *Executor) finishLocked(rs *running, status string, now time.Time) {
	if rs.finished {
		return
	}
	rs.finished = true
	if rs.cancel != nil {
		rs.cancel()
	}
	if e.ops[rs.op.RangeID] == rs {
		delete(e.ops, rs.op.RangeID)
	}
	e.log.Finish(rs.op.ID, status, now)
}

// Status describes one running operator for debugging (/debug pages, tests).
type Status struct {
	Operator *operator.Operator
	Step     int    // index of the current step
	Issued   bool   // the current step's call was made
	Waiting  string // why the current step waits, if it does
}

// Statuses returns the state of every running operator, highest priority first.
func (e *Executor) Statuses() []Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Status
	for _, rs := range e.sortedLocked() {
		out = append(out, Status{Operator: rs.op, Step: rs.step, Issued: rs.issued, Waiting: rs.waiting})
	}
	return out
}

// SnapshotsInFlight returns the number of AddLearner calls in flight involving node.
func (e *Executor) SnapshotsInFlight(node uint64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slots[node]
}

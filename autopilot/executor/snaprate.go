package executor

import (
	"fmt"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// MinSnapshotRate is the lowest snapshot rate a step is budgeted at, however slow the snapshots into
// a node were: below it a range's snapshot would be given hours. The transport accepts no lower
// --snapshot-rate either (transport.MinSnapshotRate, a layer the autopilot does not import).
const MinSnapshotRate = 64 << 10

// snapshotRates are the rates (bytes/s) the executor budgets a snapshot into each node at. They start
// at the configured rate (the transport's default) and learn from the learners' catch-up: a step
// whose call ran out of its time lowers its node's rate to half what the call showed at most, so
// the next try of a move onto a busy disk gets the time its snapshot needs instead of failing at the
// same point and starting the snapshot over; a step that succeeded raises it to what it showed.
type snapshotRates struct {
	max   float64
	rates map[uint64]float64
}

func newSnapshotRates(max uint64) *snapshotRates {
	return &snapshotRates{max: float64(max), rates: map[uint64]float64{}}
}

func (s *snapshotRates) rate(node uint64) float64 {
	if r, ok := s.rates[node]; ok {
		return r
	}
	return s.max
}

// observe learns from a catch-up step into node that moved bytes in took of its timeout. It returns
// a note for the decision log when the node's rate was lowered, else "".
func (s *snapshotRates) observe(node, bytes uint64, took, timeout time.Duration, failed bool) string {
	if bytes == 0 || took <= 0 {
		return ""
	}
	shown := float64(bytes) / took.Seconds()
	before := s.rate(node)
	switch {
	case failed && took >= timeout/2:
		// It did not finish in took: the rate was below shown. Half the timeout, not all of it: the
		// node answers a little before its caller's deadline (kv's reply margin), and the model's
		// clock, read when the executor looks, lags the call's end; an error that is no timeout
		// (not the leader, refused) comes at once.
		after := max(MinSnapshotRate, min(before, shown)/2)
		s.rates[node] = after
		return fmt.Sprintf("the learner on n%d did not catch up in %v (%s): snapshots into n%d budgeted at %s/s from now (were %s/s)",
			node, took.Round(time.Second), model.FormatBytes(bytes), node, model.FormatBytes(uint64(after)), model.FormatBytes(uint64(before)))
	case !failed && shown > before:
		s.rates[node] = min(s.max, shown)
	}
	return ""
}

// snapshotNode is the node a step waits to catch up by snapshot (0: none): an add-learner, and a
// promotion, which waits for the learner when the add-learner's call ended before it caught up.
func snapshotNode(step operator.Step) uint64 {
	switch s := step.(type) {
	case operator.AddLearner:
		return s.Node
	case operator.PromoteVoter:
		return s.Node
	}
	return 0
}

// timeoutLocked is step's timeout on r, with the snapshot rate learned for the node it waits on.
func (e *Executor) timeoutLocked(step operator.Step, r *model.Range) time.Duration {
	t := e.cfg.Timeouts
	if n := snapshotNode(step); n != 0 {
		t.SnapshotRate = uint64(e.rates.rate(n))
	}
	return t.Step(step, r)
}

// totalLocked is the sum of the steps' timeouts on r, each on the range as the steps before leave it.
func (e *Executor) totalLocked(steps []operator.Step, r *model.Range) time.Duration {
	var d time.Duration
	for _, s := range steps {
		d += e.timeoutLocked(s, r)
		r = s.Apply(r)
	}
	return d
}

// learnLocked tells the rates how the current step's call ended at now: failed, or not.
// Successes teach only an add-learner's rate: a promotion after the snapshot arrived is quick
// whatever the disk.
func (e *Executor) learnLocked(rs *running, now time.Time, failed bool) {
	step := rs.op.Steps[rs.step]
	n := snapshotNode(step)
	if _, add := step.(operator.AddLearner); n == 0 || (!failed && !add) {
		return
	}
	if note := e.rates.observe(n, rs.stepBytes, now.Sub(rs.issuedAt), rs.stepTimeout, failed); note != "" {
		e.log.Annotate(rs.op.ID, note)
	}
}

// Package des is the simulator's discrete-event core: a virtual clock and a queue of events, each a
// function run at its virtual time. Events at the same time run in the order they were scheduled, so
// a run is a pure function of its inputs (no wall clock, no goroutines, no map order).
//
// The package owns the clock and the event queue. It must never read the wall clock, start a
// goroutine or know what an event does: the cluster model (package sim) gives events their meaning.
package des

import (
	"container/heap"
	"time"
)

// Loop is a virtual clock with its pending events. The zero value is not usable; call New.
type Loop struct {
	now  time.Time
	seq  uint64
	q    queue
	runs uint64
}

// New returns a loop whose clock reads start.
func New(start time.Time) *Loop { return &Loop{now: start} }

// Now is the virtual time: the time of the event running, or of the last one run.
func (l *Loop) Now() time.Time { return l.now }

// Events is the number of events run so far.
func (l *Loop) Events() uint64 { return l.runs }

// Pending is the number of events scheduled and not yet run.
func (l *Loop) Pending() int { return len(l.q) }

// At schedules fn at t; a t before Now runs at Now (after the events already due then).
func (l *Loop) At(t time.Time, fn func()) {
	if t.Before(l.now) {
		t = l.now
	}
	l.seq++
	heap.Push(&l.q, &event{at: t, seq: l.seq, fn: fn})
}

// After schedules fn d after Now.
func (l *Loop) After(d time.Duration, fn func()) { l.At(l.now.Add(d), fn) }

// Every schedules fn at Now+d, Now+2d, … until fn returns false.
func (l *Loop) Every(d time.Duration, fn func() bool) {
	var tick func()
	tick = func() {
		if fn() {
			l.After(d, tick)
		}
	}
	l.After(d, tick)
}

// Step runs the next event, if there is one due at or before until, and reports whether it ran one.
func (l *Loop) Step(until time.Time) bool {
	if len(l.q) == 0 || l.q[0].at.After(until) {
		return false
	}
	e := heap.Pop(&l.q).(*event)
	l.now = e.at
	l.runs++
	e.fn()
	return true
}

// RunUntil runs every event due at or before until (including those the events schedule), then sets
// the clock to until.
func (l *Loop) RunUntil(until time.Time) {
	for l.Step(until) {
	}
	if until.After(l.now) {
		l.now = until
	}
}

type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

// queue is a min-heap by (time, scheduling order).
type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}
